"""The job ``make setup`` runs once so the driver JVM records the classes a shardflow job's
start-up loads into a class-data archive (dm_core/spark_options.py: ``driver_java_options``
maps it into every later job's driver).

It starts what every job starts -- the SparkContext, a Python job on the executors, the SQL
session the JDBC path and the validation build -- and needs no database. Run with
``-XX:ArchiveClassesAtExit=FILE`` in ``spark.driver.extraJavaOptions``; scripts/setup.sh does.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.spark_session import LazySession  # noqa: E402 (after the path above)


def main() -> int:
    spark = LazySession("shardflow-class-archive")
    try:
        sc = spark.sparkContext
        sc.parallelize(range(4), 2).map(lambda x: x + 1).collect()
        df = spark.session.range(1000).selectExpr("id", "cast(id as string) as s")
        df.groupBy().count().collect()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
