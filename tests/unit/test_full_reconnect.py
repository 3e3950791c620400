"""dm_core/full/reconnect.py: which errors mean a server went away, and how long a step waits
for it (the servers themselves: tests/integration/test_full_faults.py)."""

import MySQLdb
import pymysql
import pytest

from dm_core.errors import ErrorCode
from dm_core.faults import FaultInjected
from dm_core.full.reconnect import LOST_MARK, Patience, away_for_good, lost, server_away


def _unreachable(code, errno):
    e = code.error("cannot connect to source s root@127.0.0.1:3307: ...")
    e.errno = errno
    return e


@pytest.mark.parametrize("error, away, chunk_lost", [
    (pymysql.err.OperationalError(2013, "Lost connection to server during query"), True, True),
    (pymysql.err.OperationalError(2006, "MySQL server has gone away"), True, True),
    (MySQLdb.OperationalError(2003, "Can't connect to MySQL server"), True, True),
    (pymysql.err.OperationalError(1927, "Connection was killed"), True, True),
    (_unreachable(ErrorCode.UPSTREAM_UNREACHABLE, 2003), True, True),       # the server is down
    (_unreachable(ErrorCode.DOWNSTREAM_UNREACHABLE, 2013), True, True),
    (_unreachable(ErrorCode.UPSTREAM_UNREACHABLE, 1045), False, True),      # a refused login: not waited for
    (_unreachable(ErrorCode.DOWNSTREAM_UNREACHABLE, None), False, True),
    (ErrorCode.FULL_LOAD_FAILED.error("a chunk failed"), False, True),      # transient, but not a server away
    (FaultInjected("fault point x"), False, True),
    (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), False, False),
    (pymysql.err.IntegrityError(1062, "Duplicate entry"), False, False),
    (ValueError(2013), False, True),
])
def test_what_counts_as_a_server_away(error, away, chunk_lost):
    assert server_away(error) is away
    assert lost(error) is chunk_lost
    # a step or job that failed on it is run again by Airflow (plugins/shardflow_airflow/retry.py)
    assert away_for_good(error) is away
    try:
        try:
            raise error
        except Exception as inner:
            raise RuntimeError("chunk 3 of 8 failed") from inner
    except RuntimeError as outer:
        assert away_for_good(outer) is away


@pytest.mark.parametrize("text, away", [
    (f"s.t chunk 2 of 4 (WHERE id < 9): {LOST_MARK} OperationalError: (2013, 'Lost connection')", True),
    ("s.t chunk 2: java.sql.SQLNonTransientConnectionException: Socket fail to connect", True),
    ("s.t chunk 2: (1366, \"Incorrect decimal value: 'x' for column `d` at row 1\")", False),
    # an executor marks a refused login as it marks a server down: the job still fails for good
    (f"s.t chunk 2: {LOST_MARK} Transient: [code=30002:database] cannot connect to target u@h:4000: "
     "(1045, \"Access denied for user 'u'@'h' (using password: YES)\")", False),
])
def test_a_chunk_that_failed_on_an_executors_lost_connection_is_away(text, away):
    assert away_for_good(RuntimeError(text)) is away


def test_a_full_phase_step_that_gave_up_on_a_server_raises_what_airflow_retries():
    from shardflow_airflow.retry import ServersAway, retried_when_servers_away

    with pytest.raises(ServersAway, match=r"the full phase of t prepares: a server stayed away .*cannot connect to source"):
        with retried_when_servers_away("the full phase of t prepares"):
            raise _unreachable(ErrorCode.DOWNSTREAM_UNREACHABLE, 2003)
    with pytest.raises(pymysql.err.OperationalError):   # a refused login fails the task, as before
        with retried_when_servers_away("the full phase of t prepares"):
            raise pymysql.err.OperationalError(1045, "Access denied")


def _validation(*tables, error=None, away=False):
    from dm_core.validate.result import TableResult, ValidationResult

    return ValidationResult("t", tables=[TableResult(f"d.t{i}", error=e, server_away=a) for i, (e, a) in enumerate(tables)],
                            error=error, server_away=away)


def _resync(*tables, error=None, away=False):
    from dm_core.resync.repair import TableRepair
    from dm_core.resync.run import ResyncResult

    return ResyncResult("t", "r", tables=[TableRepair(f"d.t{i}", error=e, server_away=a) for i, (e, a) in enumerate(tables)],
                        error=error, server_away=away)


# a validation or re-sync is run again (exit 75 / ServersAway) only when every error it met was a server away
@pytest.mark.parametrize("make", [_validation, _resync])
@pytest.mark.parametrize("tables, error, away, again", [
    ([(None, False), (None, False)], None, False, False),              # it did its work
    ([("lost", True), (None, False)], None, False, True),              # one table met a server away
    ([("lost", True), ("refused value", False)], None, False, False),  # and another failed for good
    ([], "cannot connect to target", True, True),                      # nothing started: the downstream is down
    ([("lost", True)], "a bug", False, False),
])
def test_a_run_is_tried_again_only_when_every_error_was_a_server_away(make, tables, error, away, again):
    assert make(*tables, error=error, away=away).servers_away is again


@pytest.mark.parametrize("engine, said", [("spark", True), ("in-process", False)])
def test_a_validation_that_met_a_server_away_says_whether_it_runs_again(engine, said):
    from dm_core.validate.result import summary_line

    r = _validation(("OperationalError: (2013, 'Lost connection')", True), error=None)
    r.engine = engine   # the DAG's job is retried by Airflow; `dmctl validate` in process is not
    assert ("Airflow runs this validation again with backoff" in summary_line(r)) is said, summary_line(r)


def test_the_wait_doubles_up_to_30_s_and_ends_with_its_budget(caplog):
    now = [0.0]
    slept: list[float] = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    p = Patience(budget_s=100, sleep=sleep, clock=lambda: now[0])
    err = pymysql.err.OperationalError(2003, "Can't connect")
    tries = 0
    while p.wait("the full phase of t prepares", err, "running it again"):
        tries += 1
    assert slept == [1, 2, 4, 8, 16, 30, 30] and tries == 7
    assert "the full phase of t prepares: a server went away ((2003, \"Can't connect\")); running it again in 1s " \
           "(try 1, for up to 100s in all)" in caplog.text
