"""What keeps a Spark job's start-up short: pyspark imported compiled (not from Spark's zip),
the driver JVM's class-data archive given when there is one (dm_core/spark_options.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

import pytest

from dm_core import spark_options

SITE = sysconfig.get_paths()["purelib"]
LIB = os.path.join(SITE, "pyspark", "python", "lib")


def _py4j_zip() -> str:
    return next(f for f in os.listdir(LIB) if f.startswith("py4j-") and f.endswith("-src.zip"))


def _child_path(pythonpath: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", "import sys, pyspark; print(pyspark.__file__); print(*sys.path, sep='\\n')"],
                         env={**os.environ, "PYTHONPATH": pythonpath}, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_spark_zips_of_this_venv_leave_sys_path_and_pyspark_loads_compiled():
    """As spark-submit and Spark's Python workers start a process: the venv's own zips first."""
    zips = [os.path.join(LIB, "pyspark.zip"), os.path.join(LIB, _py4j_zip())]
    elsewhere = "/opt/spark/python/lib/pyspark.zip"   # a Spark installed elsewhere: kept
    pyspark_file, *path = _child_path(os.pathsep.join([*zips, elsewhere]))
    assert pyspark_file == os.path.join(SITE, "pyspark", "__init__.py")
    assert not set(zips) & set(path), path
    assert elsewhere in path


@pytest.mark.parametrize("present, expect", [(True, True), (False, False)])
def test_driver_options_map_the_class_archive_only_when_it_exists(tmp_path, monkeypatch, present, expect):
    archive = tmp_path / "driver.jsa"
    if present:
        archive.write_bytes(b"x")
    monkeypatch.setenv("SHARDFLOW_SPARK_CDS", str(archive))
    opts = spark_options.driver_java_options()
    assert opts.startswith(spark_options.DRIVER_JAVA_OPTIONS)
    assert (f"-XX:SharedArchiveFile={archive}" in opts) is expect
    assert ("-Xshare:auto" in opts) is expect   # a stale archive must never stop a job

