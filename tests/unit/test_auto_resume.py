"""The source's checker (DM's task checker): when a paused source resumes by itself, and how
its backoff grows and shrinks. Table-driven against DM's defaults, on a clock of our own."""

import pytest

from dm_core.config.source import parse_source
from dm_core.errors import ErrorCode
from dm_core.sync.auto_resume import AutoResume, CheckerSettings

RETRIES = ErrorCode.SYNC_RETRIES_EXHAUSTED.number
FIXED = CheckerSettings(backoff_jitter=False)


def _first_resume(checker: AutoResume, paused_at: float, code: int = RETRIES) -> float | None:
    """The first time, looked at every 0.5 s, the checker resumes a pause seen from ``paused_at``."""
    t = paused_at
    while t < paused_at + 3600:
        if checker.paused(code, t).resume:
            return t
        t += 0.5
    return None


@pytest.mark.parametrize("paused_at,expect", [
    (0.5, 5.0),     # DM's ticker: the first look is at the next 5 s tick, not at once
    (5.0, 5.0),     # a pause seen on a tick (a backoff of 1 s has passed since the checker began)
    (7.0, 10.0),
])
def test_the_first_resume_comes_on_the_checkers_next_tick(paused_at, expect):
    assert _first_resume(AutoResume(FIXED, now=0.0), paused_at) == expect


def test_each_resume_doubles_the_backoff_up_to_max():
    """Paused again at once after each resume: resumes 5 s apart until the backoff (1, 2, 4 s)
    passes the interval, then 8, 16 ... 300 s apart, never more."""
    c = AutoResume(FIXED, now=0.0)
    t, gaps = 0.0, []
    for _ in range(12):
        r = _first_resume(c, t)
        c.resumed(r)
        gaps.append(r - t)
        t = r
    assert gaps == [5, 5, 5, 10, 20, 35, 65, 130, 260, 300, 300, 300]
    assert c.backoff() == 300 and c.resumes == 12


@pytest.mark.parametrize("code,settings,why", [
    (RETRIES, CheckerSettings(enabled=False), "check-enable: false"),
    (ErrorCode.SYNC_FAILED.number, FIXED, "not one that goes away"),
    (None, FIXED, "not one that goes away"),
])
def test_a_pause_it_does_not_resume_says_why(code, settings, why):
    c = AutoResume(settings, now=0.0)
    d = c.paused(code, 3600.0)
    assert not d.resume and d.at is None and why in d.why


def test_running_well_for_rollback_steps_the_backoff_down_once_per_rollback():
    c = AutoResume(FIXED, now=0.0)
    for t in (5.0, 10.0, 15.0, 20.0):    # four resumes: backoff 16 s
        c.paused(RETRIES, t)
        c.resumed(t)
    assert c.backoff() == 16
    c.running(200.0)                     # less than 300 s since the last pause: no change
    assert c.backoff() == 16
    c.running(321.0)
    assert c.backoff() == 8
    c.running(400.0)                     # the rollback's clock restarted at 321
    assert c.backoff() == 8
    c.running(622.0)
    assert c.backoff() == 4


def test_jitter_keeps_the_backoff_between_half_and_whole():
    c = AutoResume(CheckerSettings(), now=0.0, rng=lambda: 0.0)
    for t in (5.0, 10.0, 15.0):
        c.paused(RETRIES, t)
        c.resumed(t)
    assert c.backoff(jitter=False) == 8 and c.backoff() == 4
    c._rng = lambda: 1.0
    assert c.backoff() == 8
    assert AutoResume(CheckerSettings(), 0.0, rng=lambda: 0.0).backoff() == 1   # min has no jitter (DM)


@pytest.mark.parametrize("block,expect", [
    ("", CheckerSettings()),
    ("checker: {check-enable: false}", CheckerSettings(enabled=False)),
    ("checker: {backoff-max: 10m, backoff-rollback: 1h}", CheckerSettings(backoff_max=600, backoff_rollback=3600)),
    # DM resets these whatever the file says
    ("checker: {check-interval: 1s, backoff-min: 3s, backoff-factor: 5, backoff-jitter: false}", CheckerSettings()),
])
def test_a_source_files_checker_block_reaches_the_checker(block, expect):
    src = parse_source("source-id: s1\nfrom: {host: h, port: 3306, user: u}\n" + block + "\n", "source.yaml")
    assert CheckerSettings.of_source(src.to_dict()) == expect


def test_a_source_registered_without_checker_settings_gets_dms_defaults():
    assert CheckerSettings.of_source({"source-id": "s1", "host": "h"}) == CheckerSettings()
    assert CheckerSettings.of_source(None) == CheckerSettings()
