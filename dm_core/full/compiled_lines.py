"""The text path's line read compiled (``lines_c.pyx``), used where its build matches.

Why: on the executors of the text path, reading the upstream's ready lines through
mysqlclient makes a Python tuple and bytes object per row, and joining them for the pipe
walks them again: 0.6 CPU-s per 1.25M-row table of the bench's rows on a 2-core machine
whose servers need those cores (the copy's whole client cost is 7-10 CPU-s per 10M rows).
``lines_c.blocks`` reads the same rows with libmariadb's calls into 1 MB blocks of
newline-ended text, without the GIL: 0.2 CPU-s for the same table, the same bytes.

Protocol:

1. ``python -m dm_core.full.compiled_lines build`` (``make setup`` runs it) compiles
   ``lines_c.pyx`` with Cython and the Debian toolchain against the libmariadb that
   mysqlclient uses, into ``build_dir()`` (inside the venv), with a manifest: the source's
   sha256, the interpreter, the client library's version. It does nothing when the manifest
   matches; a failed build prints why and exits 0 (the read stays pure Python).
2. :func:`blocks` returns the compiled reader's blocks only when the manifest matches the
   source (read through the package's loader, so also from the archive executors import
   dm_core from), the interpreter and mysqlclient's client library, and the connection's
   thread id read through the compiled module equals mysqlclient's own (the struct is where
   the module looks for it). Otherwise, and with ``SHARDFLOW_PURE_PYTHON=1``, it returns None
   and the caller reads through mysqlclient's cursor; a cluster whose workers lack the build
   does so too.

Guarantee: both paths send the same bytes (tests/integration/test_compiled_lines.py), and a
NULL line or a lost connection is an error in both, never a line dropped.
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

log = logging.getLogger("shardflow.full")

ABI = 1                   # lines_c.ABI this module calls
SOURCE = "lines_c.pyx"
MODULE = "shardflow_lines_c"   # the built module's name: imported by path, outside dm_core
_MANIFEST = "manifest.json"
BLOCK_BYTES = 1 << 20     # text per block: what the pipe takes in one write


class LineBlock:
    """One block of lines as the compiled reader gives it: ``text`` (each line newline-ended),
    ``ends`` (each line's newline offset) and ``rows``."""

    __slots__ = ("text", "ends", "rows")

    def __init__(self, text: bytes, ends: bytes, rows: int):
        self.text, self.ends, self.rows = text, ends, rows

    def __len__(self) -> int:
        return self.rows

    def line(self, i: int) -> bytes | None:
        """The ``i``-th line (0-based) without its newline, or None past the block."""
        if not 0 <= i < self.rows:
            return None
        ends = memoryview(self.ends).cast("I")
        return self.text[(ends[i - 1] + 1 if i else 0):ends[i]]


def build_dir() -> Path:
    """$SHARDFLOW_COMPILED_LINES_DIR, else <venv>/shardflow-lines-c."""
    return Path(os.environ.get("SHARDFLOW_COMPILED_LINES_DIR") or Path(sys.prefix) / "shardflow-lines-c")


def _source() -> bytes:
    # through the loader: a file on disk, or a member of the archive Spark ships (packaging.py)
    path = os.path.join(os.path.dirname(__file__), SOURCE)
    loader = globals().get("__loader__")
    if loader is not None and hasattr(loader, "get_data"):
        return loader.get_data(path)
    return Path(path).read_bytes()


def _client() -> str:
    import MySQLdb._mysql

    return MySQLdb._mysql.get_client_info()


def _want() -> dict:
    return {"python": sys.version, "soabi": sysconfig.get_config_var("EXT_SUFFIX"),
            "source": hashlib.sha256(_source()).hexdigest(), "client": _client(), "abi": ABI}


def status() -> tuple[bool, str]:
    """(usable, why) for the build as it is on disk."""
    pure = compiled_build.forced_pure()
    if pure:
        return False, pure
    root = build_dir()
    try:
        have = json.loads((root / _MANIFEST).read_text())
        want = _want()
    except (OSError, ValueError) as e:
        return False, f"no build in {root} (make setup builds it): {e}"
    for key, what in (("python", "another interpreter"), ("soabi", "another interpreter"),
                      ("source", f"an older {SOURCE} (make setup rebuilds it)"),
                      ("client", f"another client library than mysqlclient's ({want['client']})"),
                      ("abi", "another interface")):
        if have.get(key) != want[key]:
            return False, f"the build in {root} is for {what}"
    if not (root / f"{MODULE}{want['soabi']}").exists():
        return False, f"the build in {root} lacks {MODULE}"
    return True, f"compiled line read from {root}"


_loaded: tuple | None = None   # (module or None, why), once per process


def module():
    """The compiled module when usable here, else None (the reason is in :func:`reason`)."""
    global _loaded
    if _loaded is None:
        ok, why = status()
        mod = None
        if ok:
            try:
                path = build_dir() / f"{MODULE}{sysconfig.get_config_var('EXT_SUFFIX')}"
                spec = importlib.util.spec_from_file_location(MODULE, path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                if getattr(mod, "ABI", None) != ABI or mod.client_info() != _client():
                    mod, why = None, f"the module in {build_dir()} does not match (ABI or client library)"
            except Exception as e:   # a build that does not load is a pure-Python process, said once
                mod, why = None, f"the build in {build_dir()} does not load: {e}"
        _loaded = (mod, why)
    return _loaded[0]


def reason() -> str:
    module()
    return _loaded[1]


def blocks(conn, query: str):
    """The line query's rows as :class:`LineBlock` items, read in C, or None when the compiled
    read cannot be used here or on this connection (the caller reads through the cursor)."""
    mod = module()
    if mod is None:
        return None
    if mod.thread_id(conn) != conn.thread_id():   # the struct is not where the module looks
        log.warning("compiled line read: the connection's thread id does not match; reading in Python")
        return None
    return (LineBlock(text, ends, rows) for text, ends, rows in mod.blocks(conn, query.encode("utf-8"), BLOCK_BYTES))


def build(force: bool = False) -> tuple[bool, str]:
    """Compile lines_c.pyx into build_dir() unless a matching build is there; (ok, what happened)."""
    ok, why = status()
    if ok and not force:
        return True, f"up to date ({why})"
    missing = compiled_build.cython_missing()
    if missing:
        return False, missing
    flags = {}
    for opt in ("--cflags", "--libs"):
        r = subprocess.run(["mariadb_config", opt], capture_output=True, text=True)
        if r.returncode != 0:
            return False, "mariadb_config not found (Debian: libmariadb-dev)"
        flags[opt] = r.stdout.split()
    want = _want()
    root = build_dir()
    cc = (sysconfig.get_config_var("CC") or "gcc").split()
    with tempfile.TemporaryDirectory(prefix="shardflow-lines-c-") as tmp:
        pyx, c, so = Path(tmp) / f"{MODULE}.pyx", Path(tmp) / f"{MODULE}.c", Path(tmp) / f"{MODULE}{want['soabi']}"
        pyx.write_bytes(_source())
        steps = [[sys.executable, "-m", "cython", "-3", str(pyx), "-o", str(c)],
                 [*cc, "-shared", "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}", *flags["--cflags"],
                  str(c), "-o", str(so), *flags["--libs"]]]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                return False, compiled_build.failed(Path(cmd[0]).name, r)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        shutil.copy2(so, root / so.name)
        (root / _MANIFEST).write_text(json.dumps(want, indent=1))
    global _loaded
    _loaded = None
    return True, f"built {MODULE} into {root}"


def main(argv: list[str] | None = None) -> int:
    """``build [--force]`` or ``status``."""
    return compiled_build.main(argv, what="compiled line read", fallback="the full load reads lines in Python",
                               build=build, status=status)


if __name__ == "__main__":
    sys.exit(main())
