#!/usr/bin/env bash
# `make test`: the linter, then the whole suite (unit, integration, DM cases, e2e, doctests) on
# SHARDFLOW_TEST_WORKERS pytest-xdist workers (default 3: docs/testing.md says why), each on a local stack of its own.
# Worker 0 uses the stack `make stack-up` started; worker N uses the stack of
# SHARDFLOW_STACK_WORKER=N (ports N*100 higher), which this script starts if it is down and
# stops again at the end. tests/suite_plan.py says how the tests are spread and prints the
# minutes per directory. Extra arguments go to pytest (-x, -k NAME; test paths run only those).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH" PYTHONPATH="$ROOT"
export SPARK_HOME=${SPARK_HOME:-$ROOT/.venv/lib/python3.11/site-packages/pyspark}

echo "[test] ruff (pyflakes' rules)"
ruff check .

N=${SHARDFLOW_TEST_WORKERS:-3}
scripts/stack.sh status >/dev/null || { echo "[test] the local stack is down: run make stack-up first"; exit 1; }
started=()
cleanup() {
  for w in "${started[@]}"; do
    SHARDFLOW_STACK_WORKER=$w scripts/airflow.sh down >/dev/null 2>&1 || true
    SHARDFLOW_STACK_WORKER=$w scripts/stack.sh down >/dev/null || true
  done
}
trap cleanup EXIT
for ((w = 1; w < N; w++)); do
  if ! SHARDFLOW_STACK_WORKER=$w scripts/stack.sh status >/dev/null 2>&1; then
    SHARDFLOW_STACK_WORKER=$w scripts/stack.sh up
    started+=("$w")
  fi
done

paths=(tests dm_core)   # the whole suite, unless the arguments name test files or directories
for a in "$@"; do if [ -e "${a%%::*}" ]; then paths=(); fi; done
args=("${paths[@]}" --doctest-modules --durations=25)
# With the binlog reader compiled (dm_core/binlog/compiled.py) its two modules load from the build,
# which pytest cannot import by their source paths to collect doctests: those two files' doctests
# run on a pure-Python checkout only (SHARDFLOW_PURE_PYTHON=1); every test of the reader runs here.
if python -c 'import sys; from dm_core.binlog import compiled; sys.exit(0 if compiled.status()[0] else 1)' 2>/dev/null
then
  args+=(--ignore=dm_core/binlog/window.py --ignore=dm_core/binlog/dump.py)
fi
if [ "$N" -gt 1 ]; then args+=(-n "$N" --dist loadgroup --no-loadscope-reorder); fi
python -m pytest "${args[@]}" "$@"
