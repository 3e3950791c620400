"""The options every shardflow spark-submit gives the driver JVM (the Airflow operators, the
tests and the bench submit with them): they must be set at submit time, since a running JVM
ignores them.
"""

from __future__ import annotations

import os
import sys

# The driver JVM compiles with C1 only: its own work is scheduling and moving small results
# (the text path reads no row in the JVM), and C2's compiler threads took 9 of its 18
# CPU-seconds in a 10M-row load on 2 cores; the JDBC path, which does read rows in the JVM
# in local mode, measured 3% slower with C1 only.
DRIVER_JAVA_OPTIONS = "-Duser.timezone=UTC -XX:TieredStopAtLevel=1"


def class_archive() -> str:
    """Where ``make setup`` leaves the driver JVM's class-data archive (spark_jobs/class_archive.py
    is the job it records), beside the venv's Python unless SHARDFLOW_SPARK_CDS says otherwise."""
    return os.environ.get("SHARDFLOW_SPARK_CDS") or os.path.join(sys.prefix, "spark-driver.jsa")


def driver_java_options() -> str:
    """DRIVER_JAVA_OPTIONS, plus the class-data archive when there is one: the JVM maps the
    classes Spark's start-up loads instead of reading and verifying them from the jars (a
    job's start-up 6.6-7.7 s → 5.1 s on a 2-core machine). An archive that no longer matches
    the JVM or Spark's jars is ignored by the JVM (``-Xshare:auto``), silently; ``make setup``
    builds a new one when either changes."""
    path = class_archive()
    if not os.path.isfile(path):
        return DRIVER_JAVA_OPTIONS
    return f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
