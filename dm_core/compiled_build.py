"""What the project's two Cython builds share: ``dm_core/binlog/compiled.py`` (the binlog
reader) and ``dm_core/full/compiled_lines.py`` (the full load's line read). Each keeps its own
manifest and loading; here are the switch that keeps a process pure Python, the build's
preconditions and failure text, and the command line ``make setup`` calls."""

from __future__ import annotations

import os
import sys

PURE = "SHARDFLOW_PURE_PYTHON"


def forced_pure() -> str | None:
    """Why this process stays pure Python whatever is built (``SHARDFLOW_PURE_PYTHON=1``), or None."""
    return f"{PURE}=1" if os.environ.get(PURE) == "1" else None


def cython_missing() -> str | None:
    """Why nothing can be compiled here, or None when Cython is installed."""
    try:
        import Cython  # noqa: F401
    except ImportError:
        return "Cython is not installed (pip install -r requirements-build.txt)"
    return None


def failed(step: str, result) -> str:
    """A failed build step (a ``subprocess.run`` result) as one line: its last five lines of output."""
    tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
    return f"{step} failed: " + " | ".join(tail)


def main(argv: list[str] | None, *, what: str, fallback: str, build, status) -> int:
    """``build [--force]`` (prints what it did, as ``make setup`` shows it) or ``status``; always 0,
    since a failed build leaves the pure path in place. ``what``: the build's name in the
    output; ``fallback``: what runs instead when it is not built."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["build"]:
        ok, done = build(force="--force" in args)
        print(f"[setup] {what}: {done}" if ok else f"[setup] {what}: not built, {fallback}: {done}")
        return 0
    ok, why = status()
    print(f"{'compiled' if ok else 'pure Python'}: {why}")
    return 0
