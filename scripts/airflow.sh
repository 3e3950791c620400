#!/usr/bin/env bash
# `airflow standalone` on the local stack's Postgres, with the project's dags/ and plugins/.
#   scripts/airflow.sh up|down|status
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pid_alive.sh"
. "$ROOT/scripts/airflow_env.sh"
PIDF=$AIRFLOW_HOME/standalone.pid
LOG=$AIRFLOW_HOME/standalone.log

alive() { [ -f "$PIDF" ] && pid_alive "$(cat "$PIDF")"; }

case "${1:-}" in
  up)
    mkdir -p "$AIRFLOW_HOME"
    if alive; then echo "[airflow] already running on $AIRFLOW__API__BASE_URL"; exit 0; fi
    "$ROOT/scripts/stack.sh" status >/dev/null || { echo "[airflow] the stack is down: run make stack-up first"; exit 1; }
    if [ -f "$AIRFLOW_HOME/celery/scheduler.pid" ] && pid_alive "$(cat "$AIRFLOW_HOME/celery/scheduler.pid")"; then
      echo "[airflow] the Celery Airflow runs on this stack (make airflow-celery-up): make airflow-celery-down first"; exit 1
    fi
    airflow db migrate >"$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -20 "$AIRFLOW_HOME/migrate.log"; exit 1; }
    if [ "$SHARDFLOW_JOB_HOST" != off ]; then   # up before the first DAG run's Spark job asks for it
      python -m dm_core.jobhost start --detach >/dev/null || echo "[airflow] the job host did not start: Spark jobs take spark-submit"
    fi
    setsid airflow standalone >"$LOG" 2>&1 </dev/null &
    echo $! >"$PIDF"
    for _ in $(seq 1 120); do
      curl -fsS "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" >/dev/null 2>&1 && break
      alive || { tail -30 "$LOG"; echo "[airflow] failed to start"; exit 1; }
      sleep 1
    done
    curl -fsS "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" >/dev/null || { tail -30 "$LOG"; exit 1; }
    pw=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['admin'])" \
          "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated" 2>/dev/null || echo "?")
    echo "[airflow] up: $AIRFLOW__API__BASE_URL  login: admin / $pw   (log: $LOG)" ;;
  down)
    if alive; then
      pid=$(cat "$PIDF")
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
      for _ in $(seq 1 30); do pid_alive "$pid" || break; sleep 1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
      echo "[airflow] stopped"
    fi
    rm -f "$PIDF"
    # task processes started by the supervisor outlive the group in rare cases
    pkill -f "airflow.*$AIRFLOW_HOME" 2>/dev/null || true ;;
  status)
    alive || { echo "[airflow] stopped"; exit 1; }
    # `airflow standalone` lives on when a component it started dies (its metadata database went
    # away for a moment, say): the health check names those, and nothing schedules or retries then
    down=$(curl -fsS --max-time 10 "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" 2>/dev/null | python3 -c '
import json, sys
h = json.load(sys.stdin)
print(", ".join(k for k, v in h.items() if isinstance(v, dict) and v.get("status") not in (None, "healthy")))
' 2>/dev/null) || down="the API server (no answer from its health check)"
    if [ -n "$down" ]; then
      echo "[airflow] running on $AIRFLOW__API__BASE_URL, but not healthy: $down; restart it: make airflow-down && make airflow-up"
      exit 1
    fi
    echo "[airflow] running on $AIRFLOW__API__BASE_URL" ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
