#!/usr/bin/env bash
# `make test-fleet` (not part of `make test`): 16 upstream servers (scripts/fleet.sh), Airflow with
# the CeleryExecutor and 2 workers (scripts/airflow_celery.sh) on the local stack, then
# tests/fleet/test_fleet.py: one sharded task over all 16 sources with writes and shard DDL
# flowing, one worker killed, the downstream checked against the union of the shards; it prints
# lag p99 at 16 x 100 txn/s and memory per source (bench/results/fleet-*.json has all of it).
# What this script starts it stops again; the stack is started if it is down (and then stopped).
# `airflow standalone` must not run on the same stack (make airflow-down). About 6 minutes.
#   SHARDFLOW_FLEET_N (16), SHARDFLOW_FLEET_RATE (100 txn/s per source); extra arguments go to pytest.
#   SHARDFLOW_CELERY_NETNS=1 (root): each worker in a network namespace of its own (scripts/celery_netns.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH" PYTHONPATH="$ROOT"
export SPARK_HOME=${SPARK_HOME:-$ROOT/.venv/lib/python3.11/site-packages/pyspark}
N=${SHARDFLOW_FLEET_N:-16}

stack_started=0 fleet_started=0 airflow_started=0
cleanup() {
  [ $airflow_started = 1 ] && scripts/airflow_celery.sh down || true
  [ $fleet_started = 1 ] && scripts/fleet.sh down || true
  [ $stack_started = 1 ] && scripts/stack.sh down || true
}
trap cleanup EXIT

if ! scripts/stack.sh status >/dev/null 2>&1; then scripts/stack.sh up; stack_started=1; fi
if scripts/airflow.sh status >/dev/null 2>&1; then
  echo "[test-fleet] airflow standalone runs on this stack: make airflow-down first"; exit 1
fi
if scripts/airflow_celery.sh status >/dev/null 2>&1; then
  echo "[test-fleet] the Celery Airflow already runs on this stack: make airflow-celery-down first"; exit 1
fi
if ! scripts/fleet.sh status >/dev/null 2>&1; then scripts/fleet.sh up "$N"; fleet_started=1; fi
# this Airflow loads only the fleet's task files (not the checkout's config/tasks/)
export SHARDFLOW_TASKS_DIR=${SHARDFLOW_TASKS_DIR:-$ROOT/.fleet/tasks}
mkdir -p "$SHARDFLOW_TASKS_DIR"
airflow_started=1
scripts/airflow_celery.sh up
eval "$(scripts/fleet.sh env)"
# the stack's ports as absolute values (SHARDFLOW_STACK_WORKER=0 with them), as the tests read them
eval "$(scripts/stack.sh env)"
export SHARDFLOW_FLEET_TEST=1
python -m pytest tests/fleet -s -p no:cacheprovider "$@"
