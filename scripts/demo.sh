#!/usr/bin/env bash
# The demo migration, end to end through Airflow on the local stack:
# seed 2 instances x 2 schemas x 2 tables → precheck → Spark full load → binlog sync while
# more rows are written upstream → wait until synced → compare upstream union vs downstream.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH" PYTHONPATH="$ROOT"
"$ROOT/scripts/stack.sh" up
eval "$("$ROOT/scripts/stack.sh" env)"
"$ROOT/scripts/airflow.sh" up
ROWS=${DEMO_ROWS:-5000}

if dmctl query-status demo >/dev/null 2>&1; then  # a demo an earlier `make demo` left syncing
  echo "== 0. stop the demo task left running by an earlier run (its DAG runs end now)"
  dmctl stop-task demo
fi
echo "== 1. seed the upstream shards"
python scripts/demo_data.py seed --rows "$ROWS"
echo "== 2. register the sources"
dmctl operate-source create config/demo/source-1.yaml config/demo/source-2.yaml
echo "== 3. start the task (precheck → full → incremental)"
dmctl start-task config/demo/task.yaml --remove-meta
echo "== 4. write more rows upstream while it runs"
python scripts/demo_data.py churn --seconds "${DEMO_CHURN_SECONDS:-30}"
echo "== 5. wait until every source is synced"
dmctl query-status demo --wait-synced "${DEMO_WAIT_SECONDS:-900}"
dmctl query-status demo
echo "== 6. verify in process: upstream union vs downstream"
dmctl validate demo
echo "== 7. validate on Spark: dm_demo_validate (the task file schedules it hourly; this runs it now)"
rc=0
dmctl validation start demo --wait-result "${DEMO_WAIT_SECONDS:-900}" || rc=$?
pw=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['admin'])" \
      "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated" 2>/dev/null || echo "?")
echo "== the Migrations page: $SHARDFLOW_AIRFLOW_URL/plugin/migrations   (Airflow login: admin / $pw)"
exit $rc
