"""Where a Spark job runs: on the machine's job host, or in a spark-submit of its own.

``SHARDFLOW_JOB_HOST`` chooses the policy:

- ``use`` (default): the host when it runs and can take the job, else spark-submit;
- ``start``: as ``use``, and a host that is not running (never started, or dead) is started
  in the background for the jobs after this one, which itself takes spark-submit; so is an
  idle host that runs older code (restarted; a busy one is left to its jobs);
- ``off``: spark-submit always.

A job keeps spark-submit when the host cannot run it as spark-submit would: a variable read
on executors armed (runner.EXECUTOR_ENV), a master other than the host's, Spark conf beyond
what every shardflow submit sets, or code other than the worker's: the host imported
shardflow when it started, so after an upgrade (or an edit) it would run the old code
(packaging.code_fingerprint; the host is not restarted under a job that may be running).
"""

from __future__ import annotations

from dataclasses import dataclass

from dm_core.jobhost.runner import EXECUTOR_ENV

MODES = ("use", "start", "off")
# the --conf every shardflow submit sets (the host was started with the same)
STANDARD_CONF = frozenset({"spark.ui.enabled", "spark.pyspark.python", "spark.pyspark.driver.python",
                           "spark.driver.extraJavaOptions"})


@dataclass
class Route:
    host: bool          # run on the host
    why: str            # one line for the task log
    start_host: bool = False   # start a host in the background for the next jobs
    restart_host: bool = False   # stop the idle host (older code) and start one, in the background


def mode(environ) -> str:
    got = (environ.get("SHARDFLOW_JOB_HOST") or "use").strip().lower()
    if got not in MODES:
        raise ValueError(f"SHARDFLOW_JOB_HOST={got!r} is not one of {', '.join(MODES)}")
    return got


def choose(*, master: str, conf: dict, environ, status: dict | None, down_reason: str = "",
           code: str | None = None) -> Route:
    """``status``: the host's answer (client.status), None when none runs (``down_reason`` says why);
    ``code``: this worker's code_fingerprint, which the host's must equal (None: not checked)."""
    policy = mode(environ)
    if policy == "off":
        return Route(False, "SHARDFLOW_JOB_HOST=off")
    armed = sorted(k for k in EXECUTOR_ENV if environ.get(k))
    if armed:
        return Route(False, f"{', '.join(armed)} is set: the executors read it, so the job needs an application "
                            "of its own")
    extra = sorted(set(conf or {}) - STANDARD_CONF)
    if extra:
        return Route(False, f"the job sets Spark conf of its own ({', '.join(extra)})")
    if status is None:
        return Route(False, f"no job host runs ({down_reason or 'not started'})", start_host=policy == "start")
    if code is not None and status.get("code") != code:
        idle = not status.get("running") and not status.get("waiting")
        stale = (f"the job host (pid {status.get('pid')}) runs other code than this worker's: it started before "
                 f"shardflow changed here (its code {status.get('code') or 'unknown'}, here {code})")
        if policy == "start" and idle:
            return Route(False, stale, restart_host=True)
        return Route(False, stale + "; restart it to use it again: python -m dm_core.jobhost restart "
                                    "(locally: make job-host-down job-host-up)")
    if status.get("master") != master:
        return Route(False, f"the job host runs master {status.get('master')}, the job's connection says {master}")
    queue = status.get("running", 0) + status.get("waiting", 0)
    return Route(True, f"job host pid {status.get('pid')} (master {master}, {status.get('jobs', 0)} jobs run, "
                       f"{queue} ahead of this one)")
