"""The compiled binlog reader is used only while its build matches the sources (dm_core/binlog/compiled.py).

No compiler runs here (a build takes a minute of CPU): the manifest decides, and the build of
`make setup`, when there is one, is what the other binlog tests exercise.
"""

import json
import subprocess
import sys

import pytest

from dm_core.binlog import compiled


def _fake_build(root, **override):
    want = {**compiled._want(), **override}
    for m in compiled.MODULES:
        d = compiled._package_dir(root, compiled._PACKAGE[m])
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{m}{want['soabi']}").write_bytes(b"")
    pkg = compiled._package_dir(root)
    (root / compiled._MANIFEST).write_text(json.dumps(want))
    return pkg


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDFLOW_COMPILED_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("SHARDFLOW_PURE_PYTHON", raising=False)
    return tmp_path / "build"


def test_no_build_keeps_pure_python_and_says_why(build_dir):
    ok, why = compiled.status()
    assert not ok and "no build" in why and "make setup" in why


def test_a_matching_build_goes_first_on_the_package_path(build_dir):
    pkg = _fake_build(build_dir)
    path = ["/src/dm_core/binlog"]
    assert compiled.activate(path)
    assert path == [str(pkg), "/src/dm_core/binlog"]


def test_an_edited_source_or_another_interpreter_keeps_pure_python(build_dir):
    _fake_build(build_dir, sources={m: "0" * 64 for m in compiled.MODULES})
    path = ["/src"]
    assert not compiled.activate(path) and path == ["/src"]
    assert "older than binlog/window.py, binlog/dump.py" in compiled.reason


def test_another_interpreter_keeps_pure_python(build_dir):
    _fake_build(build_dir, python="3.99.0 (other)")
    ok, why = compiled.status()
    assert not ok and "another interpreter (3.99.0)" in why


def test_pure_python_on_request(build_dir, monkeypatch):
    _fake_build(build_dir)
    monkeypatch.setenv("SHARDFLOW_PURE_PYTHON", "1")
    assert compiled.status() == (False, "SHARDFLOW_PURE_PYTHON=1")


def test_the_import_uses_what_status_says():
    """In a fresh interpreter: the modules load from the build exactly when it matches."""
    code = ("from dm_core.binlog import compiled, window, dump\n"
            "print(compiled.active, window.__file__.endswith('.py'), dump.__file__.endswith('.py'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    active = out[0] == "True"
    assert out[1:] == ([str(not active)] * 2)
