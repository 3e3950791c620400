"""One re-sync run: hold the sync, rewrite the chosen keys table by table, release.

``run_resync`` is what the ``repair`` task of ``dm_<task>_resync`` calls (and tests call it
the same way). Every table is tried; one that fails is reported with its error and the run
as a whole fails after the hold is released, so the sync never stays held for a failure.

A Postgres restart under a run is waited out (dm_core/state/outage.py), as the sync and the
full load wait it out: every call on the hold is safe to repeat, and the syncers, waiting
for the same store, cannot break the hold meanwhile. A store that stays away past
``SHARDFLOW_STORE_OUTAGE_S`` ends the run before it writes again.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from dm_core.errors import ErrorCode, ShardflowError
from dm_core.full.reconnect import away_for_good, only_servers_away
from dm_core.resync import hold
from dm_core.resync.repair import TableRepair, repair_keys
from dm_core.state.outage import riding_out


@dataclass
class ResyncResult:
    task: str
    run_id: str
    why: str = ""
    held: dict = field(default_factory=dict)        # source_id → checkpoint it held at (live syncers)
    tables: list[TableRepair] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    server_away: bool = False   # ``error`` only says a server stayed away

    @property
    def ok(self) -> bool:
        return self.error is None and not any(t.error for t in self.tables)

    @property
    def servers_away(self) -> bool:
        """It failed, and only because servers stayed away: the same run later can succeed."""
        return only_servers_away(self, *self.tables)

    def summary(self) -> str:
        keys = sum(t.keys for t in self.tables)
        head = f"task {self.task}: re-sync {'done' if self.ok else 'FAILED'}"
        if self.error:
            return f"{head}: {self.error}"
        return (f"{head}: {keys} key(s) in {len(self.tables)} table(s), {sum(t.written for t in self.tables)} row(s) "
                f"written, {sum(t.deleted for t in self.tables)} deleted, {self.seconds:.1f}s")

    def render(self) -> str:
        lines = [f"why: {self.why}"] if self.why else []
        if self.held:
            lines.append("sync held at: " + ", ".join(f"{s} {c}" for s, c in sorted(self.held.items())))
        lines += [t.line() for t in self.tables]
        lines.append(self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"], d["summary"] = self.ok, self.summary()
        return d


def run_resync(task, store, run_id: str, keys: dict[str, list[dict]], *, why: str = "", log=lambda s: None,
               hold_timeout: float = 120.0) -> ResyncResult:
    """Rewrite ``keys`` (target table → validation keys) of ``task`` downstream from the
    upstream union, under the sync hold (hold.py)."""
    from dm_core.db import connect, master_position
    from dm_core.sources import source_endpoint, target_endpoint
    from dm_core.position import Position
    from dm_core.validate.plan import plan_task

    t0 = time.monotonic()
    res = ResyncResult(task.name, run_id, why)
    keys = {t: k for t, k in keys.items() if k}
    if not keys:
        res.why = why or "nothing to rewrite"
        return res
    sources = [i.source_id for i in task.mysql_instances]
    ups: dict = {}
    try:   # a server that cannot be reached leaves none of the others' connections open
        for sid in sources:
            ups[sid] = connect(source_endpoint(store, sid))
        down = connect(target_endpoint(task), downstream=True)
    except BaseException:
        for c in ups.values():
            c.close()
        raise
    try:
        plans = {p.name: p for p in plan_task(task, ups, down) if p.name in keys}
        for name in keys:
            if name not in plans:
                res.tables.append(TableRepair(name, error="not a target table of the task any more"))

        def on_store(what, call):
            return riding_out(store, call, what=f"re-sync run {run_id} {what}", log=log)

        on_store("takes the sync hold", lambda: hold.request(store, task.name, run_id))
        try:
            res.held = on_store("waits for the sources to hold",
                                lambda: hold.wait_acks(store, task.name, run_id, sources, timeout=hold_timeout))
            log(f"sync held for the re-sync (live syncers at their checkpoints: "
                f"{', '.join(f'{s} {c}' for s, c in sorted(res.held.items())) or 'none running'})")

            def before_write():
                if not on_store("renews its hold", lambda: hold.renew(store, task.name, run_id)):
                    raise ErrorCode.RESYNC_LOST_HOLD.error(f"task {task.name}: re-sync run {run_id} lost its hold")
                now = {}
                for sid, conn in ups.items():
                    f, p, _ = master_position(conn)
                    now[sid] = Position(f, p)
                on_store("raises the safe-mode exit points", lambda: hold.raise_safe_exit(store, task.name, now))

            for name, plan in sorted(plans.items()):
                try:
                    r = repair_keys(plan, keys[name], ups, down, before_write=before_write)
                except ShardflowError as e:
                    if e.code in (ErrorCode.RESYNC_LOST_HOLD, ErrorCode.STATE_STORE_UNREACHABLE):
                        raise   # nothing more may be written
                    r = TableRepair(name, error=str(e), server_away=away_for_good(e))
                except Exception as e:  # noqa: BLE001 - one table's failure is its result; the others go on
                    r = TableRepair(name, error=f"{type(e).__name__}: {e}", server_away=away_for_good(e))
                res.tables.append(r)
                log(r.line())
        finally:
            on_store("releases the sync", lambda: hold.release(store, task.name, run_id))
            log("sync released: sources resume from their checkpoints, in safe mode up to the position after "
                "the last read")
    except Exception as e:  # noqa: BLE001 - reported in the result, which the caller fails on
        res.error, res.server_away = f"{type(e).__name__}: {e}", away_for_good(e)
    finally:
        for c in [*ups.values(), down]:
            c.close()
    res.tables.sort(key=lambda t: t.target)
    res.seconds = time.monotonic() - t0
    return res
