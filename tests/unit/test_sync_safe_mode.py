"""What a start of a source's sync decides about safe mode (dm_core/sync/safe_mode.py), as DM's
enableSafeModeInitializationPhase: the exit point against the start, and `safe-mode-duration`."""

import pytest

from dm_core.config.units import SyncerConfig
from dm_core.errors import ErrorCode, Terminal
from dm_core.position import Position
from dm_core.sync.safe_mode import start_phase

P100, P200 = Position("mysql-bin.000001", 100), Position("mysql-bin.000001", 200)
LATER_FILE = Position("mysql-bin.000002", 4)


def cfg(**kw) -> SyncerConfig:
    return SyncerConfig(**kw)


@pytest.mark.parametrize("config, begin, exit_point, seconds", [
    # no exit point (an incremental start): safe mode for the duration, DM's default 2 x flush interval
    (cfg(), P100, None, 60.0),
    (cfg(checkpoint_flush_interval=5), P100, None, 10.0),
    (cfg(safe_mode_duration=30.0), P100, None, 30.0),
    (cfg(safe_mode_duration=0.0), P100, None, 0.0),
    # exit point at or before the start: nothing to replay
    (cfg(), P200, P200, 0.0),
    (cfg(safe_mode_duration=0.0), P200, P100, 0.0),
    (cfg(safe_mode_duration=0.0), LATER_FILE, P200, 0.0),
    # exit point past the start: safe mode up to it (the syncer's per-transaction rule), no timer
    (cfg(), P100, P200, 0.0),
    (cfg(safe_mode_duration=30.0), P200, LATER_FILE, 0.0),
    # safe-mode: true keeps it on anyway, so 0s has nothing to refuse
    (cfg(safe_mode=True, safe_mode_duration=0.0), P100, P200, 0.0),
])
def test_start_phase(config, begin, exit_point, seconds):
    assert start_phase(config, "s1", begin, exit_point) == seconds


@pytest.mark.parametrize("exit_point", [P200, LATER_FILE])
def test_zero_duration_refuses_to_replay_without_safe_mode(exit_point):
    with pytest.raises(Terminal) as got:
        start_phase(cfg(safe_mode_duration=0.0), "s1", P100, exit_point)
    e = got.value
    assert e.code is ErrorCode.SAFE_MODE_REPROCESS
    assert "your `safe-mode-duration` in task.yaml is set to 0s, the task can't be re-processed without safe mode " \
           "currently" in str(e)
    assert "greater than `0s`" in e.workaround


@pytest.mark.parametrize("config, may", [
    (cfg(), True), (cfg(safe_mode_duration=0.0), False), (cfg(safe_mode=True, safe_mode_duration=0.0), True),
])
def test_may_replay_in_safe_mode(config, may):
    from dm_core.sync.safe_mode import may_replay

    assert may_replay(config) is may
