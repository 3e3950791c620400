"""dm_core/state/outage.py: waiting for a state store that went away, as the sync and the full
load do (their servers are in tests/integration/test_state_store_outage.py and test_full_resume.py)."""

import pytest

from dm_core.errors import ErrorCode
from dm_core.state.outage import reconnect_within, store_away


class _Store:
    """Away for the first ``away`` reconnects; then ``then`` (None: back)."""

    def __init__(self, away: int, then: Exception | None = None):
        self.away, self.then, self.tries = away, then, 0

    def reconnect(self):
        self.tries += 1
        if self.tries <= self.away:
            raise ErrorCode.STATE_STORE_UNREACHABLE.error("cannot connect to the state store: Connection refused")
        if self.then is not None:
            raise self.then


@pytest.mark.parametrize("away, limit, stop_after, want", [
    (0, 300, None, 0.0),        # back at once
    (3, 300, None, 7.0),        # waited 1 + 2 + 4 s
    (20, 10, None, None),       # stayed away past the limit
    (20, 300, 5, None),         # stopped (the task was stopped) while it waited
])
def test_reconnect_waits_with_backoff_until_back_a_limit_or_a_stop(away, limit, stop_after, want):
    slept: list[float] = []
    got = reconnect_within(_Store(away), limit, sleep=slept.append,
                           stop=lambda: stop_after is not None and len(slept) >= stop_after)
    assert got == want
    assert all(s == 1.0 for s in slept), "the wait goes a second at a time, so that a stop is seen soon"
    if stop_after is not None:
        assert len(slept) == stop_after


def test_an_error_that_is_not_the_store_away_is_raised():
    with pytest.raises(ValueError):
        reconnect_within(_Store(1, then=ValueError("bad dsn")), 300, sleep=lambda s: None)


def test_what_counts_as_the_store_away():
    assert store_away(ErrorCode.STATE_STORE_UNREACHABLE.error("x"))
    assert not store_away(ValueError("x"))
    assert not store_away(ErrorCode.FULL_LOAD_FAILED.error("x"))
