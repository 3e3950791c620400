"""dm_core as one zip archive, for Spark executors that do not have the project on disk.

Why: the full load and validation run Python on executors (Arrow batches into LOAD DATA,
row digests). On a cluster those executors run on other machines; ``SparkContext.addPyFile``
ships the archive with the job and puts it on their ``sys.path``, so workers need only
Python and the packages of requirements.txt, not a checkout of shardflow.
"""

from __future__ import annotations

import hashlib
import os
import zipfile

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(PACKAGE_DIR)


def _sources(folder: str, suffixes: tuple[str, ...]):
    """(path, path relative to the project root) of the files under ``folder``, sorted."""
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(suffixes):
                full = os.path.join(here, f)
                yield full, os.path.relpath(full, ROOT)


def code_fingerprint() -> str:
    """A digest of the code a Spark job's driver and executors run (dm_core, its .pyx sources,
    spark_jobs): a long-lived job host records it when it starts, and a job whose worker has
    other code than that (shardflow upgraded or edited since) does not run there
    (dm_core/jobhost/route.py)."""
    h = hashlib.sha256()
    for folder, suffixes in ((PACKAGE_DIR, (".py", ".pyx")), (os.path.join(ROOT, "spark_jobs"), (".py",))):
        for full, rel in _sources(folder, suffixes):
            with open(full, "rb") as f:
                data = f.read()
            h.update(f"{rel}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()[:16]


def project_archive(dest_dir: str) -> str:
    """Write ``dm_core.zip`` (the package's .py files, and its .pyx sources, against which
    compiled_lines checks a build) into ``dest_dir``; return its path."""
    path = os.path.join(dest_dir, "dm_core.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for full, rel in _sources(PACKAGE_DIR, (".py", ".pyx")):
            z.write(full, rel)
    return path
