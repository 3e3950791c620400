"""A Spark application that stays up and runs shardflow's jobs one after another on its one
SparkContext, so that every job after the first skips Spark's start-up: the JVM, the
SparkContext, the executors' Python workers and their imports (3-5 s per spark-submit on a
2-core machine; a job on a running application starts in about 0.1 s).

Two ways in, which share the one-job-at-a-time slot:

- ``--socket PATH``: the product's job host (dm_core/jobhost/: any number of clients, each
  job's log streamed back as it runs; started by ``python -m dm_core.jobhost start``);
- ``--requests FIFO``: the test suite's (tests/spark_host.py), one JSON object per line on a
  named pipe the client holds open (spark-submit does not pass its stdin on to the Python
  driver)::

      {"job": "full_load", "argv": ["--task", "t"], "env": {"SHARDFLOW_CHUNK_ROWS": "100"},
       "answer": "/path/answer.json"}

  The host writes ``{"rc": N, "log": TEXT, "out": TEXT, "seconds": S}`` to ``answer``, then
  prints ``DONE_MARK answer`` on a line of stdout. The end of the requests (the client closed
  the pipe, or died) stops the application.

``READY_MARK`` is printed once the SparkContext is up. A job's ``env`` is its driver's
environment (dm_core/jobhost/runner.py); variables the executors read are refused.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dm_core.jobhost.runner import EXECUTOR_ENV, LOG_FORMAT, cancel, run_job  # noqa: E402,F401 (after the path above)
from dm_core.packaging import code_fingerprint  # noqa: E402
from spark_jobs import full_load, validate  # noqa: E402

CODE = code_fingerprint()   # the code imported now, which every job here runs (dm_core/jobhost/route.py)

READY_MARK = "[shardflow job host: ready]"
DONE_MARK = "[shardflow job host: done]"
JOBS = {"full_load": full_load.run_on, "validate": validate.run_on}
JVM_CHECK_S = 5
# What the jobs import when they first run (the task parser and sqlglot among them), imported
# while the host starts: its first job then starts as fast as its later ones (0.3 s less).
PRELOAD = ("dm_core.config.task", "dm_core.full.chunk_writer", "dm_core.full.discover", "dm_core.full.fence",
           "dm_core.full.land", "dm_core.full.loader", "dm_core.full.small_tables", "dm_core.state.store",
           "dm_core.validate.compare")

log = logging.getLogger("shardflow.jobhost")


def _serve_requests(spark, path: str, slot: threading.Lock) -> None:
    with open(path) as requests:
        for line in requests:
            if not line.strip():
                continue
            request = json.loads(line)
            text, out = io.StringIO(), io.StringIO()
            with slot:
                answer = run_job(JOBS, spark, request, text, out)
            with open(request["answer"], "w") as f:
                json.dump({**answer, "log": text.getvalue(), "out": out.getvalue()}, f)
            # the process's own stdout: a socket job running now has sys.stdout redirected to its client
            print(f"{DONE_MARK} {request['answer']}", file=sys.__stdout__, flush=True)


def _watch_jvm(sc, server) -> None:
    """A host whose JVM died cannot run jobs but would still answer: end it, so that
    ``status`` says it is down and a starter replaces it."""
    while not server.stopped.wait(JVM_CHECK_S):
        try:
            sc._jsc.sc().isStopped()
        except Exception as e:  # py4j: the JVM is gone
            log.error("the job host's JVM is gone (%s): exiting", e)
            os._exit(1)


def _serve_socket(spark, path: str):
    from dm_core.jobhost.server import Server

    sc = spark.sparkContext

    def run(request, sink):
        return run_job(JOBS, spark, request, sink, sink)

    server = Server(path, run, describe=lambda: {"master": sc.master, "app_id": sc.applicationId,
                                                    "code": CODE},
                    cancel=lambda: cancel(sc))
    server.listen()
    threading.Thread(target=_watch_jvm, args=(sc, server), name="jvm-watch", daemon=True).start()
    return server


def main(argv=None) -> int:
    import argparse

    from spark_jobs.spark_session import LazySession

    p = argparse.ArgumentParser(description="shardflow's jobs on one long-lived Spark application")
    p.add_argument("--requests", help="a named pipe (mkfifo) the client writes requests to")
    p.add_argument("--socket", help="a Unix socket to serve jobs on (dm_core/jobhost)")
    args = p.parse_args(argv)
    if not (args.requests or args.socket):
        p.error("--requests, --socket or both")
    full_load.prepare_process()
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    t0 = time.monotonic()
    spark = LazySession("shardflow-job-host")
    full_load._warm_up(spark.sparkContext)
    for name in PRELOAD:
        importlib.import_module(name)
    server = _serve_socket(spark, args.socket) if args.socket else None
    log.info("job host ready in %.1fs (master %s, jobs: %s)", time.monotonic() - t0, spark.sparkContext.master,
             ", ".join(JOBS))
    print(READY_MARK, flush=True)
    try:
        if server and args.requests:
            threading.Thread(target=server.serve, name="jobhost-accept", daemon=True).start()
            _serve_requests(spark, args.requests, server.slot)
        elif server:
            server.serve()
        else:
            _serve_requests(spark, args.requests, threading.Lock())
    finally:
        if server:
            server.drain()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
