"""The SparkSession every shardflow job runs in: UTC everywhere, values as stored, and
dm_core shipped to the executors as an archive (dm_core/packaging.py), so cluster workers
need no copy of the project."""

from __future__ import annotations

import os
import tempfile

JDBC_JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")

# The driver JVM compiles with C1 only: its own work is scheduling and moving small results
# (the text path reads no row in the JVM), and C2's compiler threads took 9 of its 18
# CPU-seconds in a 10M-row load on 2 cores; the JDBC path, which does read rows in the JVM
# in local mode, measured 3% slower with C1 only. Set at submit time (a running JVM ignores
# it): plugins/shardflow_airflow/runtime.submit_conf and the bench pass it.
DRIVER_JAVA_OPTIONS = "-Duser.timezone=UTC -XX:TieredStopAtLevel=1"


def create_session(app: str):
    from pyspark.sql import SparkSession

    from dm_core.packaging import project_archive

    b = (SparkSession.builder.appName(app)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
         .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.executorEnv.TZ", "UTC")
         .config("spark.sql.readSideCharPadding", "false")  # CHAR(n) values as stored, not blank-padded
         .config("spark.scheduler.mode", "FAIR")
         .config("spark.ui.enabled", "false"))
    if "spark.jars" not in (os.environ.get("PYSPARK_SUBMIT_ARGS") or ""):
        b = b.config("spark.jars", JDBC_JAR)
    spark = b.getOrCreate()
    # executors import dm_core from this archive, never from a checkout on their disk
    spark.sparkContext.addPyFile(project_archive(tempfile.mkdtemp(prefix="shardflow-job-")))
    return spark
