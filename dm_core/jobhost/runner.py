"""One job on the host's SparkContext, as a spark-submit of it would run: its driver
environment, its log (Python logging from every thread, stderr, the traceback of a job that
raised) and what it printed, its exit code."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import traceback

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# read on executors, whose environment is fixed when the application starts
EXECUTOR_ENV = frozenset({"SHARDFLOW_FAULTS"})

# The running job was cancelled (its client went away: dm_core/jobhost/server.py). Its Spark
# jobs are cancelled as they start; a job's driver checks this before each step that would
# start more (a table of the full load), so it ends soon and says why. Never set under
# spark-submit, whose application ends with its process.
CANCELLED = threading.Event()


def cancel(sc) -> None:
    """Cancel the running job: every Spark job of the application is its (one job at a time)."""
    CANCELLED.set()
    sc.cancelAllJobs()


class JobEnv:
    """The driver's environment for one job, put back as it was afterwards. ``exact``: the
    ``SHARDFLOW_*`` variables are the job's only (the host's own are dropped for the job)."""

    def __init__(self, env: dict, *, exact: bool = False):
        self.env = dict(env)
        if exact:
            self.env.update({k: None for k in os.environ if k.startswith("SHARDFLOW_") and k not in env})
        self.saved: dict = {}

    def __enter__(self):
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def refusal(jobs: dict, request: dict) -> str | None:
    """Why the host cannot run this request, or None."""
    if request.get("job") not in jobs:
        return f"unknown job {request.get('job')!r}; jobs: {', '.join(jobs)}"
    armed = sorted(k for k in EXECUTOR_ENV & (request.get("env") or {}).keys() if request["env"][k])
    if armed:
        return (f"{', '.join(armed)} is read on the executors, whose environment is fixed when the application "
                "starts: run this job with spark-submit")
    return None


def run_job(jobs: dict, spark, request: dict, log_stream, out_stream) -> dict:
    """Run ``jobs[request["job"]](spark, argv)``; its log goes to ``log_stream``, what it prints
    to ``out_stream``. Returns ``{"rc": N, "seconds": S}``."""
    started = time.monotonic()
    CANCELLED.clear()
    why = refusal(jobs, request)
    if why:
        log_stream.write(why + "\n")
        return {"rc": 2, "seconds": 0.0}
    handler = logging.StreamHandler(log_stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with JobEnv(request.get("env") or {}, exact=bool(request.get("env_exact"))), \
                contextlib.redirect_stderr(log_stream), contextlib.redirect_stdout(out_stream):
            rc = jobs[request["job"]](spark, list(request.get("argv") or []))
    except SystemExit as e:   # argparse's errors, a job's refusal: what the process would exit with
        if isinstance(e.code, str):
            log_stream.write(e.code + "\n")
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:     # the job's failure is its answer; the host stays up
        log_stream.write(traceback.format_exc())
        rc = 1
    finally:
        root.removeHandler(handler)
    return {"rc": rc or 0, "seconds": round(time.monotonic() - started, 3)}
