"""dm_core/state/outage.py: waiting for a state store that went away, as the sync and the full
load do (their servers are in tests/integration/test_state_store_outage.py and test_full_resume.py)."""

import pytest

from dm_core.errors import ErrorCode
from dm_core.state.outage import opening, reconnect_within, riding_out, store_away


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


class _Call:
    """Fails with ``errors`` in turn, then returns "done"."""

    def __init__(self, *errors: Exception):
        self.errors, self.calls = list(errors), 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def _gone():
    return ErrorCode.STATE_STORE_UNREACHABLE.error("cannot connect to the state store: Connection refused")


@pytest.mark.parametrize("call, store, want, calls, said", [
    (_Call(), _Store(0), "done", 1, []),                                         # nothing to wait for
    (_Call(_gone()), _Store(2), "done", 2, ["unreachable while x renews", "back after 3s: x renews goes on"]),
    (_Call(_gone()), _Store(99), ErrorCode.STATE_STORE_UNREACHABLE, 1, ["unreachable"]),   # away past the limit
    (_Call(ValueError("bad")), _Store(0), ValueError, 1, []),                     # not the store: raised at once
    (_Call(*[_gone()] * 5), _Store(0), ErrorCode.STATE_STORE_UNREACHABLE, 5, ["unreachable", "back"] * 4),  # passes used up
])
def test_riding_out_repeats_a_call_once_the_store_is_back(call, store, want, calls, said):
    lines: list[str] = []
    if isinstance(want, str):
        assert riding_out(store, call, what="x renews", log=lines.append, limit=60, sleep=lambda s: None) == want
    else:
        with pytest.raises(Exception) as got:
            riding_out(store, call, what="x renews", log=lines.append, limit=60, sleep=lambda s: None)
        assert (getattr(got.value, "code", None) is want) if isinstance(want, ErrorCode) else isinstance(got.value, want)
        if want is ErrorCode.STATE_STORE_UNREACHABLE and store.away == 99:
            assert "stayed unreachable for 60s while x renews" in str(got.value)
    assert call.calls == calls
    assert len(lines) == len(said) and all(s in line for s, line in zip(said, lines)), lines


def test_opening_waits_until_a_connection_can_be_opened():
    tries, opened = [], []

    class _Conn:
        def close(self):
            opened.remove(self)

    def open_store():
        tries.append(1)
        if len(tries) <= 3:
            raise _gone()
        c = _Conn()
        opened.append(c)
        return c

    lines: list[str] = []
    got = opening(open_store, what="x opens", log=lines.append, sleep=lambda s: None)
    assert opened == [got], "the probe's connection is closed; the one returned stays open"
    assert len(tries) == 5 and "unreachable while x opens" in lines[0] and "back after" in lines[1], (tries, lines)
