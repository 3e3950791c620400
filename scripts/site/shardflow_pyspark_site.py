"""Imports pyspark and py4j from the venv's compiled files, not from Spark's zips.

scripts/setup.sh copies this module and shardflow_pyspark_site.pth (which imports it) into
the venv's site-packages, so it runs at the start of every Python process of the venv.

Why: spark-submit and Spark's Python workers put ``$SPARK_HOME/python/lib/pyspark.zip`` and
``py4j-*-src.zip`` first on PYTHONPATH. Python compiles what it imports from a zip on every
start (it cannot cache that bytecode): 1.3 s of CPU per process on a 2-core machine, paid by
each job's driver and by its executors' Python daemon, plus 1.3 s in the driver when
``addPyFile`` invalidates the zip importers' caches. When SPARK_HOME is the venv's own
pip-installed pyspark, the same files of the same version sit compiled in site-packages, so
the zips are dropped from ``sys.path`` and imports find those. A Spark installed elsewhere
(its zips live outside site-packages) is left alone, and so is a zip whose package is not
installed here.
"""

import os
import sys
import sysconfig


def _installed_here(site: str, zip_name: str) -> bool:
    if zip_name == "pyspark.zip":
        return os.path.isfile(os.path.join(site, "pyspark", "__init__.py"))
    if zip_name.startswith("py4j-") and zip_name.endswith("-src.zip"):
        return os.path.isdir(os.path.join(site, zip_name[: -len("-src.zip")] + ".dist-info"))
    return False


def _drop_spark_zips() -> None:
    site = sysconfig.get_paths()["purelib"]
    lib = os.path.join(site, "pyspark", "python", "lib")
    sys.path[:] = [p for p in sys.path
                   if not (os.path.dirname(p) == lib and _installed_here(site, os.path.basename(p)))]


_drop_spark_zips()
