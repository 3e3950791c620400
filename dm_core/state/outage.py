"""A state store (Postgres) that went away: how a long-running process tells, and waits for it.

Why wait rather than fail: the sync's and the full load's processes hold work in flight (a
window, chunks landing) whose effects count only once recorded; failing would hand the
restart to an Airflow that shares that Postgres and may be gone too. Waiting keeps the process
and loses nothing: what was cut off is read (sync) or adopted or landed again (full load).
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

T = TypeVar("T")

# how long a process waits for a state store that went away (a Postgres restart)
STORE_OUTAGE_S = float(os.environ.get("SHARDFLOW_STORE_OUTAGE_S") or 300)


def is_store_outage(e: BaseException) -> bool:
    """The state store cannot be reached: psycopg's OperationalError, also where shardflow
    said so (STATE_STORE_UNREACHABLE, raised from it)."""
    from dm_core.errors import ErrorCode

    if getattr(e, "code", None) is ErrorCode.STATE_STORE_UNREACHABLE and e.__cause__ is not None:
        e = e.__cause__
    # OperationalError: the server went away; InterfaceError: a connection that broke before
    return type(e).__module__.startswith("psycopg") and type(e).__name__ in ("OperationalError", "InterfaceError")


def store_away(e: BaseException) -> bool:
    """``is_store_outage``, or shardflow's STATE_STORE_UNREACHABLE however it was raised (a
    connection that could not be opened at all)."""
    from dm_core.errors import ErrorCode

    return getattr(e, "code", None) is ErrorCode.STATE_STORE_UNREACHABLE or is_store_outage(e)


def reconnect_within(store, limit: float, *, sleep: Callable[[float], None] = time.sleep,
                     stop: Callable[[], bool] = lambda: False) -> float | None:
    """Reconnect ``store`` (a StateStore), retrying with backoff (1 s doubling to 30 s) while
    the server stays away, for up to ``limit`` seconds or until ``stop()``; the seconds waited,
    None if it stayed away (or the wait was stopped). Any other error is raised."""
    waited, wait = 0.0, 1.0
    while True:
        try:
            store.reconnect()
            return waited
        except Exception as again:  # noqa: BLE001 - still away, or something else (raised)
            if not store_away(again):
                raise
            if waited >= limit or stop():
                return None
            for _ in range(int(wait)):   # a second at a time: a stop ends the wait soon
                if stop():
                    return None
                sleep(1.0)
            waited, wait = waited + wait, min(30.0, wait * 2)


def riding_out(store, call: Callable[[], T], *, what: str, log: Callable[[str], None],
               limit: float | None = None, passes: int = 5, sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, waiting out a state store that went away under it: reconnect
    (``reconnect_within``) and call again, at most ``passes`` times. For calls that are safe to
    repeat (a re-sync's calls on its hold, a validation's record of its result, reads). Raises
    STATE_STORE_UNREACHABLE naming ``what`` once the store stayed away ``limit`` seconds
    (default ``STORE_OUTAGE_S``)."""
    from dm_core.errors import ErrorCode

    limit = STORE_OUTAGE_S if limit is None else limit
    for n in range(1, passes + 1):
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - the store away is waited out, anything else raised
            if not store_away(e) or n == passes:
                raise
            log(f"the state store is unreachable while {what} ({one_line(e)}): waiting up to {limit:.0f}s for it "
                "(SHARDFLOW_STORE_OUTAGE_S)")
            waited = reconnect_within(store, limit, sleep=sleep)
            if waited is None:
                raise ErrorCode.STATE_STORE_UNREACHABLE.error(
                    f"the state store stayed unreachable for {limit:.0f}s while {what}: {one_line(e)}") from e
            log(f"the state store is back after {waited:.0f}s: {what} goes on")
    raise AssertionError("unreachable")


def opening(open_store: Callable[[], T], *, what: str, log: Callable[[str], None], limit: float | None = None,
            sleep: Callable[[float], None] = time.sleep) -> T:
    """``open_store()`` (a new StateStore), waiting as ``riding_out`` does while the server is
    away: for work that opens a connection of its own mid-run."""

    class _Again:   # reconnect_within's probe: can a connection be opened yet?
        @staticmethod
        def reconnect() -> None:
            open_store().close()

    return riding_out(_Again(), open_store, what=what, log=log, limit=limit, sleep=sleep)


def one_line(e: BaseException | str) -> str:
    """An error as one line of a log or a status message (its text's whitespace folded)."""
    return " ".join(str(e).split())[:500] or type(e).__name__

