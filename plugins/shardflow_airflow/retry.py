"""Which failures of shardflow's Airflow steps are run again: a server that stayed away.

Each step of the full phase already waits for a server that goes away (the load per chunk,
prepare and finish per step: ``SHARDFLOW_FULL_RECONNECT_S``, 600 s). A server away for longer --
a TiDB upgrade, an upstream failed over by hand -- ended the full DAG, which then waited for
`dmctl start-task`. DM's task checker instead resumes a load unit paused on such an error,
with a backoff from 1 s doubling to 5 min, for as long as it takes. Here Airflow does the same
through the task's retry policy: a step that failed only because a server stayed away raises
``ServersAway`` and is run again after 1, 2, 4 ... 300 s (each run is a rerun: recorded low
watermarks and loaded chunks are kept), and every other failure fails the task at once, as
before, for `dmctl start-task` once its cause is fixed. `dmctl stop-task` and `pause-task`
end a run waiting for its retry as they end a running one.

The validation's job and the re-sync's comparison and repair take the same policy: a scheduled
validation that met a downstream being upgraded checks again once it is back, instead of
failing the run after two tries 30 s apart.
"""

from __future__ import annotations

import contextlib
import datetime

from airflow.sdk.exceptions import AirflowException

# Airflow's retries count is finite; with the backoff capped at 5 min and each try waiting up to
# SHARDFLOW_FULL_RECONNECT_S for the server itself, this many tries outlast any upgrade.
TRIES = 1000


class ServersAway(AirflowException):
    """A step failed only because an upstream or the downstream stayed away: run it
    again later (the retry policy of ``when_servers_away``)."""


def when_servers_away() -> dict:
    """Operator arguments of a step that is safe to run again (the full DAG's prepare, load and
    finish, the validation, the re-sync's comparison and repair): retried with DM's checker
    backoff when a server stayed away, failed at once on anything else."""
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

    return dict(
        retries=TRIES, retry_delay=datetime.timedelta(seconds=1), retry_exponential_backoff=2.0,
        max_retry_delay=datetime.timedelta(minutes=5),
        retry_policy=ExceptionRetryPolicy(
            rules=[RetryRule(exception=ServersAway, action=RetryAction.RETRY,
                             reason="a server stayed away: the step runs again once the backoff has passed")],
            default=RetryAction.FAIL),
    )


FULL_PHASE_ENDS = "`dmctl resume-task` runs it now; `dmctl stop-task` or `pause-task` ends the tries"


def servers_away(step: str, e: BaseException | str | None, ends: str = FULL_PHASE_ENDS) -> ServersAway:
    """The error a step raises for Airflow's retry; ``e``: what it failed on (None: a job's exit
    code); ``ends``: the commands that end the tries of this step."""
    from dm_core.state.outage import one_line

    why = (f"a server stayed away longer than the step waits for it (the last error: {one_line(e)})" if e is not None
           else "a server it needs is away (the job's log above names it and how long it waited)")
    return ServersAway(f"{step}: {why}. Airflow runs the "
                       f"step again with backoff (1 s doubling to 5 min), from what was recorded; {ends}")


def validation_ends(task: str) -> str:
    return f"`dmctl resume-task {task}` runs it now; `dmctl validation stop {task}` or `dmctl stop-task {task}` ends the tries"


def resync_ends(task: str) -> str:
    return (f"`dmctl resume-task {task}` runs it now; `dmctl stop-task {task}` ends the tries (the sync's hold is "
            f"released before each)")


@contextlib.contextmanager
def retried_when_servers_away(step: str, ends: str = FULL_PHASE_ENDS):
    """Inside: an error that means a server stayed away (dm_core/full/reconnect.py) leaves as
    ``ServersAway``, which ``when_servers_away``'s policy runs again; any other error as is."""
    from dm_core.full.reconnect import away_for_good

    try:
        yield
    except Exception as e:
        if away_for_good(e):
            raise servers_away(step, e, ends) from e
        raise
