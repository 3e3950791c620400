"""dm_core as one zip archive, for Spark executors that do not have the project on disk.

Why: the full load and validation run Python on executors (Arrow batches into LOAD DATA,
row digests). On a cluster those executors run on other machines; ``SparkContext.addPyFile``
ships the archive with the job and puts it on their ``sys.path``, so workers need only
Python and the packages of requirements.txt, not a checkout of shardflow.
"""

from __future__ import annotations

import os
import zipfile

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def project_archive(dest_dir: str) -> str:
    """Write ``dm_core.zip`` (the package's .py files, and its .pyx sources, against which
    compiled_lines checks a build) into ``dest_dir``; return its path."""
    path = os.path.join(dest_dir, "dm_core.zip")
    root = os.path.dirname(PACKAGE_DIR)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for folder, dirs, files in os.walk(PACKAGE_DIR):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                if f.endswith((".py", ".pyx")):
                    full = os.path.join(folder, f)
                    z.write(full, os.path.relpath(full, root))
    return path
