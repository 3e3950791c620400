"""The SparkSession every shardflow job runs in: UTC everywhere, values as stored, and
dm_core shipped to the executors as an archive (dm_core/packaging.py), so cluster workers
need no copy of the project."""

from __future__ import annotations

import os
import tempfile

JDBC_JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")


def create_session(app: str):
    from pyspark.sql import SparkSession

    from dm_core.packaging import project_archive

    b = (SparkSession.builder.appName(app)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
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
