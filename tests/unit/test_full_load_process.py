"""The full-load driver process before its Spark session's thread starts (full_load.prepare_process)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_typing_is_imported_before_the_session_thread_starts():
    # dataclasses reads sys.modules["typing"] without the import lock: a dataclass defined on the
    # main thread while the session's thread imported typing died on a half-made module (seen in
    # tests/integration/test_full_ddl_during_load.py). A fresh interpreter, as spark-submit starts.
    probe = ("import sys; import spark_jobs.full_load as f; before = 'typing' in sys.modules; "
             "f.prepare_process(); print(before, 'typing' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
