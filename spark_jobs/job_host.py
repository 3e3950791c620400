"""A Spark application that stays up and runs shardflow's jobs one after another on its one
SparkContext, so that every job after the first skips Spark's start-up: the JVM, the
SparkContext, the executors' Python workers and their imports (3-5 s per spark-submit on a
2-core machine; a job on a running application starts in about 0.1 s).

Who uses it: the test suite (tests/spark_host.py), for the full loads that do not test the
process itself. Kills, exit codes, fault points armed on executors, the Spark cluster and
Airflow's SparkSubmitOperator keep a spark-submit of their own, and the DAGs submit one
application per job as before.

Protocol, one job at a time, one JSON object per line on the requests file (``--requests``: a
named pipe the client holds open; spark-submit does not pass its stdin on to the Python driver)::

    {"job": "full_load", "argv": ["--task", "t"], "env": {"SHARDFLOW_CHUNK_ROWS": "100"},
     "answer": "/path/answer.json"}

``env`` is the driver's environment for this job only (``null`` removes a variable). The
executors' Python workers keep the environment the application started with, so a variable
they read (``EXECUTOR_ENV``) is refused: such a job needs an application of its own. The host
runs the job, writes ``{"rc": N, "log": TEXT, "out": TEXT, "seconds": S}`` to ``answer``, then
prints ``DONE_MARK answer`` on a line of stdout. ``log`` is what the job logged (Python logging
from every thread, what it wrote to stderr, the traceback of a job that raised) and ``out``
what it printed: what spark-submit's output would show of it. ``READY_MARK`` is printed once the SparkContext is up. The end of the requests (the client
closed the pipe, or died) stops the application.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs import full_load  # noqa: E402 (after the path above)

READY_MARK = "[shardflow job host: ready]"
DONE_MARK = "[shardflow job host: done]"
EXECUTOR_ENV = frozenset({"SHARDFLOW_FAULTS"})  # read on executors: fixed when the application starts
JOBS = {"full_load": full_load.run_on}


class _JobEnv:
    """The driver's environment for one job, put back as it was afterwards."""

    def __init__(self, env: dict):
        self.env, self.saved = env, {}

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


def run_job(spark, request: dict) -> dict:
    """One request: its job run on ``spark`` with its log captured. Returns the answer."""
    started = time.monotonic()
    fn = JOBS.get(request.get("job"))
    env = request.get("env") or {}
    if fn is None:
        return {"rc": 2, "log": f"unknown job {request.get('job')!r}; jobs: {', '.join(JOBS)}", "seconds": 0.0}
    if EXECUTOR_ENV & env.keys():
        return {"rc": 2, "log": f"{', '.join(sorted(EXECUTOR_ENV & env.keys()))} is read on the executors, whose "
                                "environment is fixed when the application starts: run this job with spark-submit",
                "seconds": 0.0}
    text, out = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(logging.Formatter(full_load.LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with _JobEnv(env), contextlib.redirect_stderr(text), contextlib.redirect_stdout(out):
            rc = fn(spark, list(request.get("argv") or []))
    except SystemExit as e:   # argparse's errors, a job's refusal: what the process would exit with
        if isinstance(e.code, str):
            text.write(e.code + "\n")
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:     # the job's failure is its answer; the host stays up
        text.write(traceback.format_exc())
        rc = 1
    finally:
        root.removeHandler(handler)
    return {"rc": rc, "log": text.getvalue(), "out": out.getvalue(), "seconds": round(time.monotonic() - started, 3)}


def main(argv=None) -> int:
    import argparse

    from spark_jobs.spark_session import LazySession

    p = argparse.ArgumentParser(description="shardflow's jobs on one long-lived Spark application")
    p.add_argument("--requests", required=True, help="a named pipe (mkfifo) the client writes requests to")
    args = p.parse_args(argv)
    full_load.prepare_process()
    logging.basicConfig(level=logging.INFO, format=full_load.LOG_FORMAT)
    spark = LazySession("shardflow-job-host")
    full_load._warm_up(spark.sparkContext)
    print(READY_MARK, flush=True)
    try:
        with open(args.requests) as requests:
            for line in requests:
                if not line.strip():
                    continue
                request = json.loads(line)
                answer = run_job(spark, request)
                with open(request["answer"], "w") as f:
                    json.dump(answer, f)
                print(f"{DONE_MARK} {request['answer']}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
