"""Compile the binlog reader's hot modules with Cython (dm_core/binlog/compiled.py); `make setup` runs it.

    .venv/bin/python scripts/compile_binlog.py [--force]      # prints what it did; always exits 0
    .venv/bin/python scripts/compile_binlog.py status         # compiled or pure Python, and why
"""

import sys

from dm_core.binlog.compiled import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if sys.argv[1:2] == ["status"] else ["build", *sys.argv[1:]]))
