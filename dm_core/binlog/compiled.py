"""The binlog reader's hot modules as C extensions (Cython), used only while they match the sources.

Why: a window of single-row transactions goes through ``window.BinlogWindow._run`` four times
per row (GTID, TABLE_MAP, ROWS, XID events), framed by ``dump.BinlogDump.events``; that
loop's own bytecode is the largest part of the reader's time, and decoding the row images the
next. Cython compiles the loop's files, unchanged, into extension modules that run the same code
without the interpreter's per-bytecode cost, and ``rowcodec.pyx``, the row decoder written for
it (measured in docs/benchmarks.md, "incremental").

Protocol:

1. ``python scripts/compile_binlog.py`` (``make setup`` runs it) compiles ``SOURCES``
   into ``build_dir()`` (inside the venv: the build belongs to that interpreter) with a
   manifest of each source's sha256 and the interpreter's version. It does nothing when the
   manifest already matches; when the build fails the command prints why and exits 0, and
   the reader stays pure Python (step 2 finds no matching build).
2. At import (``dm_core/binlog/__init__.py``), ``activate(__path__)`` puts the build's
   directory before the sources on the package's path only if the manifest matches every
   source on disk now; then ``dm_core.binlog.window`` and ``dm_core.binlog.dump`` load from
   the build, and ``decode.py`` reads row images with ``dm_core.binlog.rowcodec`` instead of
   its generated decoders. Anything else (no build, an edited source, another interpreter,
   ``SHARDFLOW_PURE_PYTHON=1``) keeps all of them pure Python, and one log line says why.

Guarantee: ``window`` and ``dump`` are the sources compiled as they are (``annotation_typing``
off, so annotations never become C types), so they behave as the pure ones; the binlog tests
run against whichever the import picked (``tests/unit/test_binlog_compiled.py`` checks both).
``rowcodec`` is held to the generated decoders value by value
(``tests/unit/test_binlog_rowcodec.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from dm_core import compiled_build

log = logging.getLogger("shardflow.binlog")

# dm_core/<package>/<file>, compiled together: the reader's two modules as they are; the row
# decoder, the statement text and the appliers' job stages written for Cython (decode.py's
# generated decoders, literal.py's Renderer and compactor / causality / merger are their
# pure-Python twins)
SOURCES = ("binlog/window.py", "binlog/dump.py", "binlog/rowcodec.pyx", "sync/sqltext.pyx", "sync/jobplan.pyx")
MODULES = tuple(f.rsplit("/", 1)[1].rsplit(".", 1)[0] for f in SOURCES)
_PACKAGE = {m: f.split("/", 1)[0] for m, f in zip(MODULES, SOURCES)}
_SRC = Path(__file__).resolve().parents[1]
_MANIFEST = "manifest.json"

active = False        # whether this process reads binlogs through the compiled modules
reason = "not activated"


def build_dir() -> Path:
    """Where the build lives: $SHARDFLOW_COMPILED_DIR, else <venv>/shardflow-compiled."""
    return Path(os.environ.get("SHARDFLOW_COMPILED_DIR") or Path(sys.prefix) / "shardflow-compiled")


def _want() -> dict:
    return {"python": sys.version, "soabi": sysconfig.get_config_var("EXT_SUFFIX"),
            "sources": {m: hashlib.sha256((_SRC / f).read_bytes()).hexdigest() for m, f in zip(MODULES, SOURCES)}}


def _package_dir(root: Path, package: str = "binlog") -> Path:
    return root / "dm_core" / package


def status() -> tuple[bool, str]:
    """(usable, why) for the build as it is on disk against the sources as they are."""
    pure = compiled_build.forced_pure()
    if pure:
        return False, pure
    root = build_dir()
    try:
        have = json.loads((root / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False, f"no build in {root} (make setup builds it)"
    want = _want()
    if have.get("python") != want["python"] or have.get("soabi") != want["soabi"]:
        return False, f"the build in {root} is for another interpreter ({have.get('python', '?').split()[0]})"
    stale = [f for m, f in zip(MODULES, SOURCES) if have.get("sources", {}).get(m) != want["sources"][m]]
    if stale:
        return False, f"the build in {root} is older than {', '.join(stale)} (make setup rebuilds it)"
    missing = [m for m in MODULES if not (_package_dir(root, _PACKAGE[m]) / f"{m}{want['soabi']}").exists()]
    if missing:
        return False, f"the build in {root} lacks {', '.join(missing)}"
    return True, f"compiled modules from {root}"


def activate(package_path: list[str]) -> bool:
    """Put the build first on ``dm_core.binlog``'s ``__path__`` if it matches the sources."""
    global active, reason
    active, reason = status()
    if active:
        package_path.insert(0, str(_package_dir(build_dir())))
    else:
        log.info("binlog reader: pure Python (%s)", reason)
    return active


def build(force: bool = False) -> tuple[bool, str]:
    """Compile MODULES into build_dir() unless a matching build is there; (ok, what happened)."""
    ok, why = status()
    if ok and not force:
        return True, f"up to date ({why})"
    missing = compiled_build.cython_missing()
    if missing:
        return False, missing
    root = build_dir()
    with tempfile.TemporaryDirectory(prefix="shardflow-cython-") as tmp:
        # the package markers make Cython name the modules dm_core.<package>.<name>
        (Path(tmp) / "dm_core").mkdir()
        (Path(tmp) / "dm_core" / "__init__.py").write_text("")
        for package in set(_PACKAGE.values()):
            _package_dir(Path(tmp), package).mkdir()
            (_package_dir(Path(tmp), package) / "__init__.py").write_text("")
        for f in SOURCES:
            shutil.copy2(_SRC / f, Path(tmp) / "dm_core" / f)
        want = _want()   # hashed after copying: a source edited meanwhile fails the next status()
        cmd = [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "-3",
               "-X", "annotation_typing=False", "-X", "binding=True",
               *(f"dm_core/{f}" for f in SOURCES)]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        built = [_package_dir(Path(tmp), _PACKAGE[m]) / f"{m}{want['soabi']}" for m in MODULES]
        if r.returncode != 0 or not all(p.exists() for p in built):
            return False, compiled_build.failed("cythonize", r)
        shutil.rmtree(root, ignore_errors=True)
        for m, p in zip(MODULES, built):
            _package_dir(root, _PACKAGE[m]).mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, _package_dir(root, _PACKAGE[m]) / p.name)
        (root / _MANIFEST).write_text(json.dumps(want, indent=1))
    return True, f"built {', '.join(MODULES)} into {root}"


def load(name: str):
    """A compiled module outside ``dm_core.binlog`` (``sqltext``, ``jobplan``), or None while the build is
    not active (the caller keeps its pure-Python path). Loaded by file: the package's own path
    stays as it is."""
    if not active:
        return None
    full = f"dm_core.{_PACKAGE[name]}.{name}"
    if full not in sys.modules:
        path = _package_dir(build_dir(), _PACKAGE[name]) / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
        spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[full] = module
    return sys.modules[full]


def main(argv: list[str] | None = None) -> int:
    """``build [--force]`` or ``status`` (scripts/compile_binlog.py)."""
    return compiled_build.main(argv, what="compiled binlog reader", fallback="the reader stays pure Python",
                               build=build, status=status)
