"""When a source's changes are written in safe mode (DM's ``syncer/safe_mode.go``).

Safe mode writes a change so that applying it again is harmless (dml.py: INSERT → REPLACE,
UPDATE → DELETE + REPLACE; a DDL the target already has is not run again: ddl/replay.py).
A transaction is written in safe mode when any of these holds:

1. ``safe-mode: true`` in the task's syncer config: always;
2. it ends at or before the source's safe-mode exit point (checkpoint.py): changes up to
   there may be downstream already (the full phase's catch-up up to its high watermark,
   what a window that died had sent, the rows a re-sync rewrote);
3. the syncer started with *no* exit point at all: for the first ``safe-mode-duration``
   seconds of that start (DM's default: twice ``checkpoint-flush-interval``). That is an
   incremental task's first start, from ``meta`` or from the upstream's position now, where
   the downstream may already hold changes past the start.

A *start* is what DM calls running the syncer unit: a new sensor process (Airflow's retry of
a killed one, start-task), a new syncer after an error (the session's retry), a resume after
a pause. At each start :func:`start_phase` decides, as DM's ``enableSafeModeInitializationPhase``:

- exit point above the checkpoint: safe mode up to it (2.); with ``safe-mode-duration: 0s``
  the source refuses to replay and pauses with DM's error instead (``SAFE_MODE_REPROCESS``),
  unless ``safe-mode: true`` keeps safe mode on anyway (DM refuses then too, which
  contradicts its own message; shardflow does not);
- exit point at or below the checkpoint: nothing to replay, safe mode off (DM: "exitPoint
  equal to beginLocation, so disable the safe mode");
- no exit point: safe mode for ``safe-mode-duration`` seconds (3.); ``0s``: none.

A batch the downstream rejects for good is applied again one transaction at a time in safe
mode to find the culprit (isolate.py); with ``0s`` (and ``safe-mode: false``) it is not
(:func:`may_replay`): the source pauses at the batch's start with the downstream's error, and
a resume meets the refusal above, as in DM.

Unlike DM, shardflow never loses its exit point: it is written before a window's first batch
is sent (apply_queue.py), so case 3 only happens before anything was ever applied.
"""

from __future__ import annotations

import logging

from dm_core.errors import ErrorCode
from dm_core.position import Position

log = logging.getLogger("shardflow.sync")


def start_phase(cfg, source_id: str, begin: Position, exit_point: Position | None) -> float:
    """Seconds of time-based safe mode (3.) this start gets, 0.0 for none. ``cfg``: the
    source's syncer config; ``begin``: where the start reads from (the checkpoint);
    ``exit_point``: the source's safe-mode exit point, None if it has none. Raises
    ``SAFE_MODE_REPROCESS`` (terminal) when the source would have to replay without safe mode."""
    duration = float(cfg.safe_mode_duration or 0.0)
    if exit_point is not None:
        log.info("source %s: compare the safe-mode exit point %s and the start %s", source_id, exit_point, begin)
        if exit_point.key() <= begin.key():
            return 0.0
        if duration == 0 and not cfg.safe_mode:
            raise ErrorCode.SAFE_MODE_REPROCESS.error(
                f"source {source_id}: your `safe-mode-duration` in task.yaml is set to 0s, the task can't be "
                f"re-processed without safe mode currently (changes from {begin} up to the safe-mode exit point "
                f"{exit_point} may already be downstream)")
        log.info("source %s: safe mode on up to the exit point %s", source_id, exit_point)
        return 0.0
    if duration > 0:
        log.info("source %s: safe mode on for %.0fs because of task initialization (no exit point)", source_id,
                 duration)
    return duration


def may_replay(cfg) -> bool:
    """Whether changes may be written again in safe mode (``safe-mode-duration`` above 0s, or
    ``safe-mode: true``): what the per-transaction search for a rejected row (isolate.py) needs."""
    return bool(cfg.safe_mode) or float(cfg.safe_mode_duration or 0.0) > 0
