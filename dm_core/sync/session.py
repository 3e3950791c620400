"""One source's sync as a long-lived process runs it: windows back to back, the source's fence
held for the whole life of the process, what the UI reads recorded at a steady pace.

The Airflow sensor (plugins/shardflow_airflow/sensors.py) keeps one ``SyncSession`` per task
process and calls ``step`` on every poke; tests and the bench call it the same way. A process
that dies loses nothing: every window commits its checkpoint, and the fence (a Postgres session
lock) is released when the process's connection closes (dm_core/state/lifecycle.py, 4).

Time bounds of one source (each a parameter, documented in docs/architecture.md, "The sync"):

- ``step_seconds``: the longest one ``step`` syncs before it returns (windows keep going as long as
  the source is behind, up to this bound); the caller checks in with Airflow between steps.
- a window reads at most ``window_seconds`` of binlog (the syncer's budget) before it commits.
- ``rest_seconds``: how long a step waits before returning when there is nothing to do (paused,
  waiting on a shard DDL lock, or another process holds the fence) so an idle source does not
  hammer the state store; a caught-up source returns at once and the caller's poke interval paces
  the next look at the binlog.
- ``held_warn_seconds``: a table whose rows this source holds back for a shard DDL lock
  (optimistic: a held table, optimism/held.py; pessimistic: a shard past a DDL the others of its
  group have not reached, source_group.py) for longer is warned about in the task log, and again after as long again while it stays held: its
  rows wait in the upstream's binlog, which must not be purged before the lock resolves.
- ``record_seconds``: windows are recorded (rows/s, lag: the chart on the Migrations page) and
  mirrored (Variable, XCom) at most this often, aggregated, plus at once when the source's state
  changes (paused, waiting, resumed).

Errors (the rule: nothing is retried in silence). A permanent error (dm_core/classify.py) pauses the
source inside the window, at the exact statement. A transient one (lost connection, server
gone, lock timeouts, TiDB busy) ends the window at its last checkpoint; the step says so in the
task log, records it as the source's error (query-status shows the source retrying, the
attempt and the error; the stage stays ``sync``, cleared at the next window that runs) and
retries after ``min(60, 2**n)`` seconds, up to ``TRANSIENT_RETRIES`` times in a row (about 4
minutes), then pauses the source with the last error (``SYNC_RETRIES_EXHAUSTED``). The backoff
is slept in slices of at most a second with the task's gate read between: a stop-task or
pause-task during it ends the step at once (DM's retry watches its context likewise), not after
up to a minute.
Any other exception (a bug, an answer nobody foresaw) pauses at once (``SYNC_FAILED``) with
the exception in the report. A paused source waits for `dmctl resume-task` (or `binlog
skip|replace`); the next success resets the count. A source paused because its retries ran out
is resumed by the source's checker (dm_core/sync/auto_resume.py, DM's task checker) after a
backoff from 1 s to 5 min, unless its source file sets ``checker.check-enable: false``; the
session asks the checker on every step of a paused source and says when the resume comes.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from dm_core.state import lifecycle
from dm_core.state.outage import STORE_OUTAGE_S, is_store_outage, one_line, reconnect_within

log = logging.getLogger(__name__)

# Seconds between two steps of a caught-up source (the sensor's poke interval): the idle part of its lag.
POKE_INTERVAL = 0.5
# Transient errors in a row before the source pauses (backoff min(60, 2**n) s between them).
TRANSIENT_RETRIES = 8
# A table held back this long (shard DDL, either mode) is warned about, and again as often while it stays held.
HELD_WARN_SECONDS = 1800.0


@dataclass
class StepOutcome:
    """What one step did: ``state`` is sync | caught_up | paused | waiting | fenced | held | stopped |
    another task state (a gate's reason), ``messages`` the lines the task log should show."""

    state: str
    messages: list[tuple[int, str]] = field(default_factory=list)   # (logging level, text)
    last: object = None             # the last WindowResult, if a window ran
    record: bool = False            # time to mirror what the UI reads

    def say(self, level: int, text: str) -> None:
        self.messages.append((level, text))


@dataclass
class Pacing:
    """The time bounds of one source's sync (module docstring)."""

    step_seconds: float = 10.0
    window_seconds: float = 30.0
    rest_seconds: float = 2.0
    record_seconds: float = 5.0
    transient_retries: int = TRANSIENT_RETRIES
    held_warn_seconds: float = HELD_WARN_SECONDS


@dataclass(frozen=True)
class Clocks:
    """Where a session reads the time and how it waits (tests pass their own)."""

    clock: Callable[[], float] = time.monotonic    # steps, backoff, the record pace
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time          # the age of a held table


class SyncSession:
    """Windows of one (task, source), run by one process until the source is stopped."""

    def __init__(self, task, source_id: str, store, *, generation: int | None = None,
                 pacing: Pacing | None = None, clocks: Clocks | None = None):
        self.task, self.source_id, self.store, self.generation = task, source_id, store, generation
        self.pacing = pacing or Pacing()
        clocks = clocks or Clocks()
        self._clock, self._sleep, self._wall = clocks.clock, clocks.sleep, clocks.wall
        self._held_warned: dict[tuple, float] = {}   # held table → clock of its last warning
        self._syncer = None
        self._fenced = False
        self._last_state: str | None = None
        self._next_record = 0.0
        self._acc_rows, self._acc_seconds, self._acc_lag = 0, 0.0, None
        self.failures = 0     # transient errors in a row
        self._checker = None  # AutoResume, made when first needed (it reads the source's settings)

    def step(self) -> StepOutcome:
        try:
            return self._step()
        except Exception as e:  # noqa: BLE001 - only an unreachable state store is ridden out here
            if not is_store_outage(e):
                raise
            out = self._store_outage(e)
            if out is None:   # a connection that broke, to a store that answers again at once
                out = StepOutcome("retrying")
                out.say(logging.WARNING, f"source {self.source_id}: the connection to the state store broke "
                                         f"({one_line(e)}); reconnected, the source syncs on from its checkpoint")
            return out

    def _store_outage(self, e: BaseException) -> StepOutcome | None:
        """The state store went away (a Postgres restart, a network cut): wait for it with
        backoff, keeping this process and its session, for up to ``STORE_OUTAGE_S``; then the
        error goes to Airflow's retry. Nothing is applied meanwhile: a window's effects count
        only once its checkpoint is written, and the window in flight is read again. None: the
        store answers at once, so the error was not its absence (it counts as any transient
        error, and one that stays pauses the source)."""
        sid = self.source_id
        self._syncer = None   # its connections are gone with the store's
        out = StepOutcome("retrying")
        log.warning("source %s: the state store is unreachable (%s); waiting for it for up to %.0fs", sid,
                    one_line(e), STORE_OUTAGE_S)
        try:
            waited = reconnect_within(self.store, STORE_OUTAGE_S, sleep=self._sleep)
        except Exception as again:  # noqa: BLE001 - not the store's absence
            raise e from again
        if waited is None:
            raise e
        self._fenced = False   # the fence (an advisory lock) went with the old connection
        if not waited and self._store_answers():
            return None
        out.say(logging.WARNING, f"source {sid}: the state store was unreachable ({one_line(e)}); it is back after "
                                 f"{waited:.0f}s of waiting, and the source syncs on from its checkpoint")
        return out

    def _store_answers(self) -> bool:
        try:
            self.store.source_state(self.task.name, self.source_id)
            return True
        except Exception:  # noqa: BLE001 - not yet
            return False

    def _step(self) -> StepOutcome:
        name, sid = self.task.name, self.source_id
        gate_st = self.store.source_gate(name, sid)
        gate = lifecycle.gate(self.store.task_info(name), gate_st, self.generation)
        if gate.state == lifecycle.STOPPED:
            out = StepOutcome(lifecycle.STOPPED)
            out.say(logging.INFO, f"source {sid} ends its sync: {gate.reason}")
            self._flush_record(out)
            return out
        if gate.state == lifecycle.RUNNING and not self._fenced:
            self._fenced = self.store.hold_source(name, sid)
            if not self._fenced:
                out = StepOutcome("fenced")
                out.say(logging.WARNING, f"source {sid}: another process still syncs this source (one being "
                                         "stopped or killed); this one waits for it")
                return self._rest(out)
        if gate.state != lifecycle.RUNNING:
            out = StepOutcome(gate.state)
            out.say(logging.INFO, f"source {sid} waits: {gate.reason}")
            return self._rest(out)
        held = self._held()
        if held is not None:
            return self._rest(held)
        said = self._auto_resume(gate_st)
        out = self._sync(retried=bool(gate_st and gate_st.get("error") and gate_st.get("stage") != "paused"))
        out.messages[:0] = said
        return out

    def _auto_resume(self, gate_st: dict | None) -> list[tuple[int, str]]:
        """Ask the source's checker about a source paused on an error: resume it now (as
        resume-task would: the window that follows runs), or record when it will. Returns what the
        task log should say."""
        from dm_core.sync.auto_resume import AutoResume, CheckerSettings

        now = self._clock()
        if self._checker is None:
            got = self.store.get_source(self.source_id)
            self._checker = AutoResume(CheckerSettings.of_source(got[0] if got else None), now)
        paused = gate_st and gate_st.get("stage") == "paused" and gate_st.get("error")
        if not paused:
            self._checker.running(now)
            return []
        name, sid, code = self.task.name, self.source_id, gate_st.get("error_code")
        d = self._checker.paused(code, now)
        if d.resume:
            if not self.store.auto_resume(name, sid, code):
                return []   # resumed, paused or stopped by someone else meanwhile: the gate sees it next
            self._checker.resumed(now)
            return [(logging.WARNING, f"source {sid}: auto-resume #{d.attempt} of its pause on "
                                      f"{str(gate_st['error']).splitlines()[0]}; it syncs on from its checkpoint, "
                                      f"and pauses again if the error stays (the source's checker; the next "
                                      f"auto-resume waits up to {self._checker.backoff(jitter=False):.0f}s)")]
        if d.at is None or not d.planned:   # said once per pause
            return []
        wait = max(0.0, d.at - now)
        self.store.update_source_state(name, sid, auto_resume_at=datetime.fromtimestamp(self._wall() + wait, timezone.utc))
        return [(logging.WARNING, f"source {sid} resumes by itself in {max(1, math.ceil(wait))}s (auto-resume #{d.attempt}, the "
                                  f"source's checker); `dmctl resume-task {name} -s {sid}` resumes it now, `dmctl "
                                  f"pause-task {name} -s {sid}` keeps it paused")]

    def _held(self) -> StepOutcome | None:
        """A re-sync holds the task (dm_core/resync/hold.py): between two windows, say at which
        checkpoint this source stands and apply nothing until the hold ends. A hold whose
        lease ran out (its re-sync died) is broken here and the source goes on."""
        from dm_core.resync import hold

        name, sid = self.task.name, self.source_id
        h = hold.active(self.store, name)
        if h is None:
            return None
        if h.expired:
            if hold.break_expired(self.store, name, h.run_id):
                log.warning("source %s: re-sync run %s stopped renewing its hold; sync resumes in safe mode",
                            sid, h.run_id)
            return None
        st = self.store.source_state(name, sid)
        at = f"({st['binlog_file']}, {st['binlog_pos']})" if st.get("binlog_file") else "no checkpoint"
        if sid not in h.acks:
            hold.ack(self.store, name, h.run_id, sid, at)
        out = StepOutcome("held")
        out.say(logging.INFO, f"source {sid} holds at its checkpoint {at} while re-sync run {h.run_id} rewrites "
                              "rows downstream; it resumes, in safe mode over the rewritten rows, when the re-sync ends")
        return out

    def _sync(self, retried: bool = False) -> StepOutcome:
        """One step of windows; ``retried``: the source recorded a transient error it retries."""
        from dm_core.sync.syncer import Syncer

        name, sid = self.task.name, self.source_id
        if self._syncer is None:
            self._syncer = Syncer(self.task, sid, self.store, budget_seconds=self.pacing.window_seconds,
                                  generation=self.generation)
        out = StepOutcome("sync")

        def seen(res) -> None:  # every window that ran: what the UI records, what the task log says
            if res.state != "sync":
                return
            self._accumulate(res)
            if res.rows or res.ddls or res.shard:
                out.say(logging.INFO, res.summary())

        try:
            res = self._syncer.run_until(self._clock() + self.pacing.step_seconds, on_window=seen, clock=self._clock)
        except Exception as e:  # noqa: BLE001 - every error ends in a retry or a pause, said in the log
            return self._failed(e, out)
        self.failures = 0
        if retried and res.state != "paused":
            self.store.clear_retry(name, sid)   # the transient error went away
        out.last = res
        if res.state == lifecycle.STOPPED:
            out.state = lifecycle.STOPPED
            out.say(logging.INFO, f"task {name} is stopped (or started again): source {sid} ends its sync")
            self._flush_record(out)
            return out
        if res.state == "paused" and res.paused:
            out.state = "paused"
            out.say(logging.ERROR, f"source {sid} is paused: {res.paused}\nwhat to do: fix it, then "
                                   f"`dmctl binlog skip {name}` / `dmctl binlog replace {name} \"SQL\"` / "
                                   f"`dmctl resume-task {name} -s {sid}`")
            return self._rest(out)
        if res.state != "sync":
            out.state = res.state
            out.say(logging.INFO, f"task {name} is {res.state}: source {sid} waits")
            return self._rest(out)
        if res.waiting:
            out.state = "waiting"
            out.say(logging.WARNING, f"source {sid} waits on a shard DDL lock: {res.waiting}\nsee `dmctl "
                                     f"shard-ddl-lock {name}`; a lock stuck for good is released with "
                                     "`dmctl shard-ddl-lock unlock LOCK_ID`")
            return self._rest(out)
        if res.caught_up:
            out.state = "caught_up"
        self._warn_held(out)
        self._finish(out)
        return out

    def _warn_held(self, out: StepOutcome) -> None:
        """Say which tables have been held back longer than ``held_warn_seconds`` (once per that
        long, per table and process): nothing else shows a lock that a shard never completes."""
        from dm_core.shardddl.optimism.held import held_for

        if self._syncer is None:
            return
        now, tick = self._wall(), self._clock()
        holds = self._syncer.shard.holds()
        for table, h in holds:
            age = h.age(now)
            last = self._held_warned.get(table)
            if age is None or age < self.pacing.held_warn_seconds or (last is not None and tick - last < self.pacing.held_warn_seconds):
                continue
            self._held_warned[table] = tick
            name = self.task.name
            way_out = (f"see `dmctl shard-ddl-lock {name}`; a shard that will never make the change: fix the "
                       f"downstream table by hand, then `dmctl shard-ddl-lock unlock {h.lock_id} --action skip`"
                       if self.task.shard_mode == "optimistic" else
                       f"`dmctl query-status {name}` lists under unresolved_groups the shards that have not run it: "
                       "run the same DDL there, or take them out of the task")
            out.say(logging.WARNING,
                    f"source {self.source_id}: `{table[0]}`.`{table[1]}` has been held back{held_for(h, now)} for "
                    f"the shard DDL lock {h.lock_id}: its rows from {h.start} on wait in the upstream's binlog until "
                    f"every shard has run the same DDL. Keep the upstream's binlogs from {h.start.file} on until then "
                    f"(purged, the replay cannot read them: the source pauses with 50019 and only a re-sync brings "
                    f"them back); {way_out}")
        for table in set(self._held_warned) - {t for t, _ in holds}:
            del self._held_warned[table]   # released: a later hold of it is warned about afresh

    # ---- errors ------------------------------------------------------------------------
    def _failed(self, e: Exception, out: StepOutcome) -> StepOutcome:
        from dm_core.errors import ErrorCode, ShardflowError, Transient
        from dm_core.classify import TRANSIENT, classify, errno_of

        sid = self.source_id
        self._syncer = None  # its connections may be broken: the next step builds a new one
        if is_store_outage(e):
            waited = self._store_outage(e)   # nothing can be recorded without it: wait for it
            if waited is not None:
                return waited
        transient = isinstance(e, Transient) or \
            (not isinstance(e, ShardflowError) and errno_of(e) is not None and classify(errno_of(e)) == TRANSIENT)
        if transient and self.failures < self.pacing.transient_retries:
            self.failures += 1
            wait = min(60.0, 2.0 ** self.failures)
            out.state = "retrying"
            out.say(logging.WARNING, f"source {sid}: transient error (attempt {self.failures} of {self.pacing.transient_retries}), "
                                     f"retrying from the last checkpoint in {wait:.0f}s: {one_line(e)}")
            self.store.update_source_state(
                self.task.name, sid, error=f"transient error (attempt {self.failures} of {self.pacing.transient_retries}; "
                                           f"next try in {wait:.0f}s): {one_line(e)}",
                error_code=e.code.number if getattr(e, "code", None) else None)
            self._finish(out)
            self._backoff(wait)
            return out
        if transient:
            err = ErrorCode.SYNC_RETRIES_EXHAUSTED.error(
                f"source {sid} failed {self.failures + 1} times in a row with transient errors; the last: {one_line(e)}")
        else:
            err = ErrorCode.SYNC_FAILED.error(f"source {sid} stopped on an unexpected error: {type(e).__name__}: "
                                              f"{one_line(e)}")
            log.exception("source %s: unexpected error", sid)
        self.failures = 0
        st = self.store.source_state(self.task.name, sid)
        at = f"({st['binlog_file']}, {st['binlog_pos']})" if st.get("binlog_file") else None
        # no error_pos: the checkpoint is not the failing event (`dmctl binlog` needs -b here)
        self.store.update_source_state(self.task.name, sid, stage="paused", error=str(err),
                                       error_code=err.code.number, error_stmt=None, error_pos=None)
        out.state = "paused"
        out.say(logging.ERROR, f"source {sid} is paused: {err} (at binlog position {at})\nwhat to do: fix it, then "
                               f"`dmctl resume-task {self.task.name} -s {sid}`")
        return self._rest(out)

    def _backoff(self, seconds: float) -> None:
        """Sleep a retry's backoff in slices, ending it early when the source is no longer to
        run (stop-task, pause-task, a newer start): the operator's command must not wait for it.
        The slices are counted, not timed, so a test's no-op sleep costs no clock time."""
        left = seconds
        while left > 0:
            self._sleep(min(1.0, left))
            left -= 1.0
            gate = lifecycle.gate(self.store.task_info(self.task.name),
                                  self.store.source_state(self.task.name, self.source_id), self.generation)
            if gate.state != lifecycle.RUNNING:
                return

    # ---- pacing and what the UI reads -------------------------------------------------
    def _rest(self, out: StepOutcome) -> StepOutcome:
        self._finish(out)
        self._sleep(self.pacing.rest_seconds)
        return out

    def _finish(self, out: StepOutcome) -> None:
        """Say a state once (a paused source would repeat its error every step otherwise) and
        record at once when it changes, else every ``record_seconds``."""
        kind = "running" if out.state in ("sync", "caught_up") else out.state
        changed = kind != self._last_state
        if not changed and kind not in ("running", "retrying"):
            out.messages = []
        self._last_state = kind
        if changed or self._clock() >= self._next_record:
            self._flush_record(out)

    def _accumulate(self, res) -> None:
        self._acc_rows += res.rows
        self._acc_seconds += res.seconds
        if res.lag_seconds is not None:
            self._acc_lag = res.lag_seconds  # the newest: what the source is behind now

    def _flush_record(self, out: StepOutcome) -> None:
        if self._acc_seconds or self._acc_rows:
            self.store.record_window(self.task.name, self.source_id, self._acc_rows, round(self._acc_seconds, 3),
                                     self._acc_lag)
        self._acc_rows, self._acc_seconds, self._acc_lag = 0, 0.0, None
        self._next_record = self._clock() + self.pacing.record_seconds
        out.record = True


