"""DM's task checker for one source: a source paused on an error that may go away resumes by
itself, after a backoff that grows while it keeps pausing and shrinks while it runs well.

Protocol (DM-worker's ``realTaskStatusChecker``, one ``AutoResume`` per source and process):

- The session looks every ``check_interval`` (5 s) at a source paused on an error. DM looks at
  every paused subtask on a 5 s ticker; the first look at a pause comes within that interval.
- It resumes the source when at least the current backoff has passed since its last resume (or
  since the checker first saw the source), then moves the backoff one step up: ``min`` (1 s)
  times ``factor`` (2) per step, up to ``max`` (5 min), with equal jitter (half fixed, half
  random) as DM's ``backoff.Backoff`` has it.
- While the source is not paused, the backoff steps down once per ``rollback`` (5 min) that
  passed since it was last seen paused: a source that runs well for long pays little for the
  next outage.
- A source paused by the operator (pause-task, stop-task) is not looked at: the session's gate
  keeps it waiting before this checker is asked.

Which pauses resume: only ``SYNC_RETRIES_EXHAUSTED`` (50012), the source's own retries of a
transient error (lost connection, server down, lock wait timeout) having run out. DM resumes
every error not on its unresumable list; shardflow's other pauses are a permanent error at an
exact statement (the same statement fails again: DM lists most of those as unresumable too), an
unexpected exception (a bug: resuming it would hide it) or a refusal before reading anything
(the same refusal again). So a transient error is retried without end, but never in silence:
each pause is in the log and in query-status with the time of the next resume.

Settings: the source file's ``checker`` block. As in DM, only ``check-enable``,
``backoff-rollback`` and ``backoff-max`` are read; DM resets ``check-interval``,
``backoff-min``, ``backoff-jitter`` and ``backoff-factor`` to its defaults whatever the file
says (``CheckerConfig.Adjust``), and so does shardflow (config/inventory.py warns).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from dm_core.errors import ErrorCode

# The pauses the checker resumes (module docstring).
RESUMABLE = frozenset({ErrorCode.SYNC_RETRIES_EXHAUSTED.number})


@dataclass(frozen=True)
class CheckerSettings:
    enabled: bool = True
    backoff_rollback: float = 300.0
    backoff_max: float = 300.0
    # DM's fixed values (module docstring)
    check_interval: float = 5.0
    backoff_min: float = 1.0
    backoff_factor: float = 2.0
    backoff_jitter: bool = True

    @classmethod
    def of_source(cls, config: dict | None) -> "CheckerSettings":
        """From a registered source's config (``SourceConfig.to_dict()``); defaults when it has no
        ``checker`` (a source registered before shardflow read it, or a file without the block)."""
        ck = (config or {}).get("checker") or {}
        return cls(enabled=bool(ck.get("check-enable", True)),
                   backoff_rollback=float(ck.get("backoff-rollback", cls.backoff_rollback)),
                   backoff_max=max(float(ck.get("backoff-max", cls.backoff_max)), cls.backoff_min))


@dataclass(frozen=True)
class Decision:
    """What the checker says of a paused source: ``resume`` now, or wait until ``at`` (the
    session's clock; None: it never resumes by itself, ``why`` says why)."""

    resume: bool
    at: float | None = None
    why: str = ""
    attempt: int = 0     # the auto-resume this would be, counted over the session's life
    planned: bool = False   # ``at`` was chosen by this look: the first at this pause, to be said once


class AutoResume:
    """The checker's memory of one source (DM's ``AutoResumeInfo``): lost with the process, as
    DM's is with the worker; a new process starts from the smallest backoff."""

    def __init__(self, settings: CheckerSettings, now: float, rng: Callable[[], float] = random.random):
        self.settings = settings
        self._rng = rng
        self._cwnd = 0
        self._last_resume = now    # DM: LatestResumeTime starts when the checker first sees the task
        self._last_paused = now
        self._epoch = now          # the checker's ticks: epoch + k * check_interval
        self._due: float | None = None   # the resume planned for the pause in sight
        self.resumes = 0

    def backoff(self, jitter: bool = True) -> float:
        """The current backoff (DM's ``Backoff.Current``): ``min * factor ** steps`` up to ``max``,
        with equal jitter above ``min``."""
        s = self.settings
        d = s.backoff_min * s.backoff_factor ** self._cwnd
        if jitter and s.backoff_jitter and d > s.backoff_min:
            d = d / 2 + self._rng() * d / 2
        return min(d, s.backoff_max)

    def running(self, now: float) -> None:
        """The source is not paused on an error: after ``backoff_rollback`` of that, one step down."""
        self._due = None
        if now - self._last_paused > self.settings.backoff_rollback:
            self._cwnd = max(0, self._cwnd - 1)
            self._last_paused = now

    def paused(self, code: int | None, now: float) -> Decision:
        """The source is paused on an error with ``code``: resume it now, or when."""
        self._last_paused = now
        s = self.settings
        if not s.enabled:
            return Decision(False, why="its source file sets `checker.check-enable: false`")
        if code not in RESUMABLE:
            return Decision(False, why="the error is not one that goes away by itself")
        planned = self._due is None
        if planned:
            earliest = max(self._last_resume + self.backoff(), now)
            ticks = -(-(earliest - self._epoch) // s.check_interval)   # the first tick at or after it
            self._due = self._epoch + max(ticks, 0) * s.check_interval
        return Decision(now >= self._due, self._due, attempt=self.resumes + 1, planned=planned)

    def resumed(self, now: float) -> None:
        """The source was resumed: the next pause waits one backoff step longer (DM's
        ``BoundaryForward``: no step past ``max``)."""
        self.resumes += 1
        self._last_resume = now
        self._due = None
        if self.backoff(jitter=False) < self.settings.backoff_max:
            self._cwnd += 1


def said_at(t) -> str | None:
    """How query-status and the Migrations page say a planned resume (``source_state.auto_resume_at``)."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(t, datetime) else t
