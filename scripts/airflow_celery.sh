#!/usr/bin/env bash
# Airflow with the CeleryExecutor on the local stack (`make airflow-celery-up` / `-down`): the
# scheduler, dag-processor, triggerer and api-server as separate processes, and
# SHARDFLOW_CELERY_WORKERS (default 2) Celery workers of SHARDFLOW_CELERY_CONCURRENCY slots each
# (default 24: one worker alone can carry 16 sources' sensors, the shard DDL coordinator and the
# phases around them, so a source whose worker dies finds a slot on the other). The broker is the
# Redis on 127.0.0.1:6379 (database = the Airflow port's hundreds mod 16) when it answers, else a
# redis-server of its own on 6479 + the stack's offset; SHARDFLOW_REDIS_URL names another. The
# result backend and the metadata database are the stack's Postgres, the same as
# `make airflow-up` (`airflow standalone`, the default) uses: run one or the other, not both.
# dmctl talks to either the same way (port, AIRFLOW_HOME and login are the same).
#
# A worker that dies (kill -9, a lost machine) is noticed within about 20 s instead of 60:
# its task instances stop heartbeating, the scheduler fails them and Airflow's retry puts each
# sensor on a worker that lives, where the source resumes from its checkpoint (the fence in the
# state store keeps two processes from syncing one source). docs/operations.md has the numbers.
#
# SHARDFLOW_CELERY_NETNS=1 (root; off by default): each worker runs in a network namespace of its
# own and reaches the servers over a veth link (scripts/celery_netns.sh); the servers stay on
# 127.0.0.1. SHARDFLOW_CELERY_NETNS_PORTS adds ports to those forwarded (the stack's, Airflow's,
# the broker's and the fleet's).
#   scripts/airflow_celery.sh up|down|status
#   scripts/airflow_celery.sh kill-worker N    SIGKILL worker N and every process under it (tests)
#   scripts/airflow_celery.sh start-worker N   start worker N again
#   scripts/airflow_celery.sh pids N           worker N's process and every process under it
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pid_alive.sh"
STACK_WORKER=${SHARDFLOW_STACK_WORKER:-0}   # (airflow_env.sh sets it to 0: the ports it prints are this stack's)
WORKERS=${SHARDFLOW_CELERY_WORKERS:-2}
CONCURRENCY=${SHARDFLOW_CELERY_CONCURRENCY:-24}
NETNS=${SHARDFLOW_CELERY_NETNS:-0}
# the scheduler's cap on running + queued tasks: every slot of every worker
export AIRFLOW__CORE__PARALLELISM=${AIRFLOW__CORE__PARALLELISM:-$((WORKERS * CONCURRENCY))}
# a task whose worker died is failed (and retried elsewhere) after this long without a heartbeat
# (tasks heartbeat every [workers] min_heartbeat_interval, 5 s); standalone keeps 60 s
export AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT=${AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT:-20}
export AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL=${AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL:-2}
. "$ROOT/scripts/airflow_env.sh"
export AIRFLOW__CORE__EXECUTOR=CeleryExecutor
export AIRFLOW__CELERY__RESULT_BACKEND="db+postgresql://postgres@127.0.0.1:$SHARDFLOW_PG_PORT/airflow"
export AIRFLOW__CELERY__WORKER_CONCURRENCY=$CONCURRENCY
# one message reserved per free slot: a worker does not hoard the sensors the other could run
export AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER=1
# sending a task to Redis from a loaded 2-core machine takes more than the default second
export AIRFLOW__CELERY__OPERATION_TIMEOUT=${AIRFLOW__CELERY__OPERATION_TIMEOUT:-10}
export AIRFLOW__CELERY__SYNC_PARALLELISM=1
# each worker imports the task runner, the DAG factory and the sync code once, before it forks its
# pool: a sensor then starts in seconds, not half a minute (plugins/shardflow_airflow/celery_config.py)
export AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS=shardflow_airflow.celery_config.CELERY_CONFIG
# a sensor runs for as long as its source syncs (days): Redis must never hand its message to
# another worker while it runs (the default, 24 h, would); a dead worker's sensors are retried
# through Airflow's heartbeat check instead
export AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT=${AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT:-315360000}
# a sensor whose process died is retried after 3 s, not 10 (plugins/shardflow_airflow/runtime.py)
export SHARDFLOW_SENSOR_RETRY_DELAY_S=${SHARDFLOW_SENSOR_RETRY_DELAY_S:-3}
OFF=$((STACK_WORKER * 100))
# the database of the shared Redis: one per Airflow port (8080 → 0, 8180 → 1, ... of stacks 0-9)
REDIS_DB=$(( (PORT / 100) % 16 ))
SHARED_REDIS=${SHARDFLOW_SHARED_REDIS_PORT:-6379}   # the machine's Redis, used when it answers
DIR=$AIRFLOW_HOME/celery
BROKER_FILE=$DIR/broker_url

log() { printf '[airflow-celery] %s\n' "$*"; }

pidf() { echo "$DIR/$1.pid"; }
alive() { local f; f=$(pidf "$1"); [ -f "$f" ] && pid_alive "$(cat "$f")"; }

descendants() {  # pid: the pid and every process below it
  local all
  all=$(ps -e -o pid=,ppid=)
  local todo=("$1") out=()
  while [ ${#todo[@]} -gt 0 ]; do
    local p=${todo[0]}; todo=("${todo[@]:1}")
    out+=("$p")
    while read -r c pp; do [ "$pp" = "$p" ] && todo+=("$c"); done <<<"$all"
  done
  echo "${out[@]}"
}

redis_ping() {  # port
  redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG
}

broker() {  # the broker URL, deciding it (and starting a redis-server) on the first `up`
  if [ -n "${SHARDFLOW_REDIS_URL:-}" ]; then echo "$SHARDFLOW_REDIS_URL"; return; fi
  if [ -f "$BROKER_FILE" ]; then cat "$BROKER_FILE"; return; fi
  echo "redis://127.0.0.1:$SHARED_REDIS/$REDIS_DB"
}

ensure_redis() {
  if [ -n "${SHARDFLOW_REDIS_URL:-}" ]; then echo "$SHARDFLOW_REDIS_URL" >"$BROKER_FILE"; return; fi
  if redis_ping "$SHARED_REDIS"; then
    echo "redis://127.0.0.1:$SHARED_REDIS/$REDIS_DB" >"$BROKER_FILE"; return
  fi
  local port=$((6479 + OFF))
  if ! redis_ping "$port"; then
    command -v redis-server >/dev/null || { log "no Redis answers on $SHARED_REDIS and redis-server is missing: make setup"; exit 1; }
    mkdir -p "$DIR/redis"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$DIR/redis" --save "" --appendonly no \
      --daemonize yes --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" >/dev/null
    for _ in $(seq 1 20); do redis_ping "$port" && break; sleep 0.5; done
    redis_ping "$port" || { log "redis-server did not start on $port"; tail -5 "$DIR/redis.log"; exit 1; }
    log "redis-server up on 127.0.0.1:$port (no Redis answered on $SHARED_REDIS)"
  fi
  echo "redis://127.0.0.1:$port/0" >"$BROKER_FILE"
}

start() {  # name args...: one component in a process group of its own (under $RUN_IN's command, if any)
  local name=$1; shift
  if alive "$name"; then return; fi
  # shellcheck disable=SC2086  # RUN_IN: the words of a command that execs airflow, or none
  AIRFLOW__CELERY__BROKER_URL=$(broker) setsid ${RUN_IN:-} airflow "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidf "$name")"
}

netns_ports() {  # every server a worker reaches over TCP: the stack's, Airflow's, the broker's, the fleet's
  local url=$1 hostport fleet extra=${SHARDFLOW_CELERY_NETNS_PORTS:-}
  hostport=${url#redis://}; hostport=${hostport%%/*}
  fleet=$("$ROOT/scripts/fleet.sh" env | sed -n 's/.*SHARDFLOW_FLEET_PORTS=\([0-9,]*\).*/\1/p')
  echo "$SHARDFLOW_PG_PORT" "$SHARDFLOW_UP1_PORT" "$SHARDFLOW_UP2_PORT" "$SHARDFLOW_DOWN_PORT" "$PORT" \
    "${hostport#*:}" ${fleet//,/ } ${extra//,/ }
}

start_worker() {  # n
  local RUN_IN=""
  if [ "$NETNS" = 1 ] && ! alive "worker$1"; then
    # shellcheck disable=SC2046  # one port a word
    "$ROOT/scripts/celery_netns.sh" up $((PORT / 100)) "$1" "$DIR/netns-w$1" $(netns_ports "$(broker)")
    # Spark's driver binds the host name's address, which the namespace lacks
    RUN_IN="ip netns exec $("$ROOT/scripts/celery_netns.sh" name $((PORT / 100)) "$1") env SPARK_LOCAL_IP=127.0.0.1"
  fi
  start "worker$1" celery worker --concurrency "$CONCURRENCY" --celery-hostname "worker$1@%h" \
    --skip-serve-logs --without-gossip --without-mingle
}

stop_tree() {  # name signal: the component and everything under it
  local f; f=$(pidf "$1")
  [ -f "$f" ] || return 0
  local pids; pids=$(descendants "$(cat "$f")")
  # shellcheck disable=SC2086
  kill "-$2" $pids 2>/dev/null || true
}

COMPONENTS=(scheduler dag-processor triggerer api-server)

case "${1:-}" in
  up)
    mkdir -p "$DIR"
    "$ROOT/scripts/stack.sh" status >/dev/null || { log "the stack is down: run make stack-up first"; exit 1; }
    if [ -f "$AIRFLOW_HOME/standalone.pid" ] && pid_alive "$(cat "$AIRFLOW_HOME/standalone.pid")"; then
      log "airflow standalone runs on this stack (make airflow-up): make airflow-down first"; exit 1
    fi
    ensure_redis
    airflow db migrate >"$DIR/migrate.log" 2>&1 || { tail -20 "$DIR/migrate.log"; exit 1; }
    start api-server api-server
    start scheduler scheduler
    start dag-processor dag-processor
    start triggerer triggerer --skip-serve-logs   # (its log server would take port 8794 of every stack)
    for n in $(seq 1 "$WORKERS"); do start_worker "$n"; done
    for _ in $(seq 1 180); do
      curl -fsS "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" >/dev/null 2>&1 && break
      alive api-server || { tail -30 "$DIR/api-server.log"; log "the api-server failed to start"; exit 1; }
      sleep 1
    done
    curl -fsS "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" >/dev/null || { tail -30 "$DIR/api-server.log"; exit 1; }
    for n in $(seq 1 "$WORKERS"); do
      for _ in $(seq 1 120); do grep -q "ready\." "$DIR/worker$n.log" 2>/dev/null && break; sleep 1; done
      grep -q "ready\." "$DIR/worker$n.log" || { tail -30 "$DIR/worker$n.log"; log "worker$n did not get ready"; exit 1; }
    done
    pw=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['admin'])" \
          "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated" 2>/dev/null || echo "?")
    where=""; [ "$NETNS" = 1 ] && where=", each in a network namespace of its own"
    log "up: $AIRFLOW__API__BASE_URL  login: admin / $pw; $WORKERS Celery workers x $CONCURRENCY slots$where, broker $(broker) (logs: $DIR)" ;;
  down)
    names=()
    for n in $(seq 1 "$WORKERS"); do names+=("worker$n"); done
    names+=("${COMPONENTS[@]}")
    for name in "${names[@]}"; do stop_tree "$name" TERM; done
    for _ in $(seq 1 30); do
      left=0; for name in "${names[@]}"; do alive "$name" && left=1; done
      [ $left = 0 ] && break; sleep 1
    done
    for name in "${names[@]}"; do stop_tree "$name" KILL; rm -f "$(pidf "$name")"; done
    for d in "$DIR"/netns-w*; do   # (whether or not SHARDFLOW_CELERY_NETNS is set now)
      [ -d "$d" ] || continue
      "$ROOT/scripts/celery_netns.sh" down $((PORT / 100)) "${d##*-w}" "$d"; rmdir "$d" 2>/dev/null || true
    done
    # the broker's queue and bookkeeping: tasks left in it would be delivered to the next `up`
    url=$(broker); hostport=${url#redis://}; hostport=${hostport%%/*}; db=${url##*/}
    if redis-cli -h "${hostport%:*}" -p "${hostport#*:}" -n "$db" ping 2>/dev/null | grep -q PONG; then
      for k in default unacked unacked_index unacked_mutex $(redis-cli -h "${hostport%:*}" -p "${hostport#*:}" -n "$db" \
          --scan --pattern '_kombu.binding.*'); do
        redis-cli -h "${hostport%:*}" -p "${hostport#*:}" -n "$db" del "$k" >/dev/null
      done
    fi
    if [ -f "$DIR/redis.pid" ] && pid_alive "$(cat "$DIR/redis.pid")"; then
      kill "$(cat "$DIR/redis.pid")"; log "redis-server stopped"
    fi
    rm -f "$DIR/redis.pid" "$BROKER_FILE"
    log "stopped" ;;
  status)
    rc=0
    for name in "${COMPONENTS[@]}"; do alive "$name" || { log "$name: not running"; rc=1; }; done
    for n in $(seq 1 "$WORKERS"); do alive "worker$n" || { log "worker$n: not running"; rc=1; }; done
    curl -fsS --max-time 10 "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" >/dev/null 2>&1 \
      || { log "the api-server does not answer on $AIRFLOW__API__BASE_URL"; rc=1; }
    [ $rc = 0 ] && log "running on $AIRFLOW__API__BASE_URL with $WORKERS workers, broker $(broker)"
    exit $rc ;;
  kill-worker)
    n=${2:?usage: $0 kill-worker N}
    alive "worker$n" || { log "worker$n is not running"; exit 1; }
    stop_tree "worker$n" KILL
    rm -f "$(pidf "worker$n")"
    log "worker$n and its task processes killed (SIGKILL)" ;;
  start-worker)
    n=${2:?usage: $0 start-worker N}
    mkdir -p "$DIR"
    start_worker "$n"
    log "worker$n started (log: $DIR/worker$n.log)" ;;
  pids)
    n=${2:?usage: $0 pids N}
    alive "worker$n" || exit 1
    descendants "$(cat "$(pidf "worker$n")")" ;;
  *) echo "usage: $0 up|down|status|kill-worker N|start-worker N|pids N" >&2; exit 2 ;;
esac
