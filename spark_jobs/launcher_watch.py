"""A job's Python driver ends with the spark-submit that launched it.

spark-submit's JVM starts the driver as its child. Airflow stops a task's job (a stop-task, a
pause, a run marked failed: ``SparkSubmitHook.on_kill``) by killing that JVM alone, and the
driver lived on as an orphan: seen still running 10 s later, with its state-store and database
connections (the full load's fence, dm_core/full/fence.py, among them) open beside the rerun
that a start or resume begins. The executors' Python workers end with the JVM by themselves.

Only under spark-submit (``PYSPARK_GATEWAY_PORT``: the JVM that launched the driver set it); the
job host watches its own JVM (spark_jobs/job_host.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time

CHECK_S = 0.5


def start(log: logging.Logger) -> bool:
    """Exit the process once its launcher is gone. Whether it watches (under spark-submit)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return False
    launcher = os.getppid()

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(CHECK_S)
        try:
            log.error("spark-submit (pid %d) is gone, so its task was stopped or killed: this job ends here; "
                      "what it recorded is kept and a rerun does the rest", launcher)
        finally:   # its output may have gone with it
            os._exit(1)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()
    return True
