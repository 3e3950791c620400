"""What one sync window did: the record a window returns to the session, the task log and the UI."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WindowResult:
    source_id: str
    start: str
    end: str
    until: str
    rows: int = 0
    txns: int = 0
    ddls: list[str] = field(default_factory=list)
    safe_mode: bool = False
    paused: str | None = None      # the error that paused the source
    waiting: str | None = None     # a shard DDL lock this source waits on
    shard: list[str] = field(default_factory=list)  # what shard DDL coordination did
    locks: list[dict] = field(default_factory=list) # shard DDL locks reported to
    held: list[str] = field(default_factory=list)   # optimistic: tables held back (ShardSync.held_notes)
    stopped_early: bool = False    # ended before the upstream position (shard DDL wait/rewind)
    state: str = "sync"
    lag_seconds: float | None = None
    seconds: float = 0.0

    @property
    def caught_up(self) -> bool:
        """The window read up to the upstream position it started with, and nothing holds the
        source back (a shard DDL wait or rewind, a pause)."""
        return self.end == self.until and not self.stopped_early and not self.waiting and not self.paused

    def summary(self) -> str:
        rate = f" ({self.rows / self.seconds:,.0f} rows/s)" if self.rows and self.seconds > 0 else ""
        lag = f", lag {self.lag_seconds:.1f}s" if self.lag_seconds is not None else ""
        s = (f"source {self.source_id}: {self.rows} rows in {self.txns} transactions, "
             f"{self.start} → {self.end} (upstream at {self.until}), safe mode {'on' if self.safe_mode else 'off'}, "
             f"{self.seconds:.1f}s{rate}{lag}")
        if self.ddls:
            s += f", DDL: {'; '.join(self.ddls)}"
        for line in self.shard:
            s += f"\nshard DDL: {line}"
        for line in self.held:
            s += f"\nheld back: {line}"
        if self.waiting:
            s += f"\nWAITING: {self.waiting}"
        if self.paused:
            s += f"\nPAUSED: {self.paused}"
        return s
