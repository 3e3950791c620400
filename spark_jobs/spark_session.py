"""The SparkSession every shardflow job runs in: UTC everywhere, values as stored, and
dm_core shipped to the executors as an archive (dm_core/packaging.py), so cluster workers
need no copy of the project."""

from __future__ import annotations

import os
import tempfile
import threading
import warnings

from dm_core.spark_options import DRIVER_JAVA_OPTIONS

JDBC_JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")

# PySpark checks the pandas version the first time it converts a py4j argument and warns about
# pandas 3 in every job log; no shardflow job hands pandas objects to Spark (the Arrow path
# uses pyarrow), so the warning says nothing a user can act on.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def _conf(app: str):
    from pyspark import SparkConf

    conf = (SparkConf().setAppName(app)
            .set("spark.sql.session.timeZone", "UTC")
            .set("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
            .set("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
            .set("spark.executorEnv.TZ", "UTC")
            .set("spark.sql.readSideCharPadding", "false")  # CHAR(n) values as stored, not blank-padded
            .set("spark.scheduler.mode", "FAIR")
            .set("spark.ui.enabled", "false"))
    if "spark.jars" not in (os.environ.get("PYSPARK_SUBMIT_ARGS") or "") and not conf.contains("spark.jars"):
        conf = conf.set("spark.jars", JDBC_JAR)
    return conf


def _ship_project(sc) -> None:
    from dm_core.packaging import project_archive

    # executors import dm_core from this archive, never from a checkout on their disk
    sc.addPyFile(project_archive(tempfile.mkdtemp(prefix="shardflow-job-")))


def stop_quickly(spark) -> None:
    """``spark.stop()`` (a SparkSession or a SparkContext) without waiting for PySpark's
    accumulator server to wind down.

    Why: the server serves the JVM's one connection in its only thread, which looks for the
    stop flag once a second, and ``SparkContext.stop`` waits for it: one second at the end of
    every job (a 10M-row copy is 33 s). Every job has finished when this is called, so no
    update can come: the stop runs on a daemon thread, which the process's exit ends too.
    """
    sc = getattr(spark, "sparkContext", spark)
    srv = getattr(sc, "_accumulatorServer", None)
    sc._accumulatorServer = None       # SparkContext.stop skips what it has no server for
    spark.stop()
    if srv is not None:
        threading.Thread(target=srv.shutdown, name="accumulator-server-stop", daemon=True).start()


def create_session(app: str):
    """A SparkSession (DataFrames, Spark SQL) with the settings above."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.config(conf=_conf(app)).getOrCreate()
    _ship_project(spark.sparkContext)
    return spark


class LazySession:
    """The SparkContext now, the SQL session when first asked for (``session``).

    Why: building the SQL session (Catalyst's session state in the JVM, pandas and pyarrow
    imported in the driver) took 1.8 of a job's ~5 s start-up here, and the full load's text
    path never uses it: it only runs Python functions on executors. Tables that take the
    JDBC path build it on first use.
    """

    def __init__(self, app: str):
        import threading

        from pyspark import SparkContext

        self.sparkContext = SparkContext.getOrCreate(_conf(app))
        _ship_project(self.sparkContext)
        self._session = None
        self._lock = threading.Lock()

    @property
    def session(self):
        with self._lock:
            if self._session is None:
                from pyspark.sql import SparkSession

                self._session = SparkSession.builder.getOrCreate()  # on this SparkContext
            return self._session

    def stop(self) -> None:
        stop_quickly(self.sparkContext)
