#!/usr/bin/env bash
# The hermetic local stack: two upstream MariaDB (binlog on, ROW, row image FULL; up1 logs
# column names (binlog_row_metadata=FULL), up2 runs MariaDB's default NO_LOG, as most MySQL
# and MariaDB upstreams do, so its rows are named by shardflow's schema tracker), one downstream
# MySQL-protocol server standing in for TiDB, and PostgreSQL (Airflow metadata + shardflow
# state store). Everything listens on 127.0.0.1 and lives under $SHARDFLOW_STACK_DIR.
#   scripts/stack.sh up|down|status|env|reset|pg-bounce [SECONDS]|job-host start|stop|status
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pid_alive.sh"
# SHARDFLOW_STACK_WORKER=N (N >= 1): the stack of test worker N (`make test` runs the suite on
# several workers, each with a stack of its own): every port N*100 higher, its own directory.
WORKER=${SHARDFLOW_STACK_WORKER:-0}
OFF=$((WORKER * 100))
STACK_DIR=${SHARDFLOW_STACK_DIR:-$ROOT/.stack}
[ "$WORKER" -gt 0 ] && STACK_DIR=$STACK_DIR-w$WORKER
UP1_PORT=$((${SHARDFLOW_UP1_PORT:-3307} + OFF))
UP2_PORT=$((${SHARDFLOW_UP2_PORT:-3308} + OFF))
DOWN_PORT=$((${SHARDFLOW_DOWN_PORT:-4000} + OFF))
PG_PORT=$((${SHARDFLOW_PG_PORT:-5433} + OFF))
AIRFLOW_PORT=$((${SHARDFLOW_AIRFLOW_PORT:-8080} + OFF))
DB_USER=${SHARDFLOW_STACK_USER:-shardflow}
# A local, loopback-only stack: this default is not a secret; real servers take theirs
# from Airflow connections or the environment.
DB_PASSWORD=${SHARDFLOW_STACK_PASSWORD:-shardflow-local}
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

# name port server-id binlog? binlog_row_metadata
MYSQLDS=("up1 $UP1_PORT 101 1 ${SHARDFLOW_UP1_ROW_METADATA:-FULL}" "up2 $UP2_PORT 102 1 ${SHARDFLOW_UP2_ROW_METADATA:-NO_LOG}"
  "down $DOWN_PORT 200 0 -")

log() { printf '[stack] %s\n' "$*"; }

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

mysqld_alive() { # name port
  local pidf="$STACK_DIR/$1/mariadbd.pid"
  [ -f "$pidf" ] && pid_alive "$(cat "$pidf")"
}

sql_root() { # port sql
  mariadb --no-defaults -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 -e "$2"
}

mysqld_up() { # name port server-id binlog row-metadata
  local name=$1 port=$2 sid=$3 binlog=$4 metadata=${5:-FULL} dir="$STACK_DIR/$1"
  if mysqld_alive "$name"; then log "$name already running on $port"; return; fi
  mkdir -p "$dir"
  # A tmpdir of its own, the install's bootstrap server's too: every mariadbd deletes the #sql*
  # files in its tmpdir when it starts, so servers sharing /tmp (test fixtures, a second stack)
  # would pull temporary tables out from under each other's queries ("Error on delete of
  # '/tmp/#sql-temptable-…'", a crash in Aria, an aborted install).
  mkdir -p "$dir/tmp"
  if [ ! -d "$dir/data/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" --tmpdir="$dir/tmp" \
      --auth-root-authentication-method=normal >"$dir/install.log" 2>&1 \
      || { cat "$dir/install.log"; exit 1; }
  fi
  local args=(--no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --port="$port" --socket="$dir/mariadbd.sock"
    --pid-file="$dir/mariadbd.pid" --bind-address=127.0.0.1 --user="$(id -un)"
    --server-id="$sid" --log-error="$dir/error.log" --innodb-buffer-pool-size=256M
    --max-connections=500 --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
    --skip-name-resolve --innodb-flush-log-at-trx-commit=2 --sync-binlog=0
    --local-infile=1 --secure-file-priv="")
  # Interleaved AUTO_INCREMENT locking, MySQL 8's default (MariaDB's 1 makes every LOAD DATA
  # and INSERT ... SELECT hold a table lock for the whole statement, so the full load's chunks
  # into one merged table would run one at a time; TiDB has no such lock). Safe with ROW binlogs.
  args+=(--innodb-autoinc-lock-mode=2)
  if [ "$binlog" = 1 ]; then
    args+=(--log-bin=mysql-bin --binlog-format=ROW --binlog-row-image=FULL
      --binlog-row-metadata="$metadata" --max-binlog-size=256M --expire-logs-days=7)
  fi
  setsid mariadbd "${args[@]}" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 60); do
    sql_root "$port" "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.5
  done
  sql_root "$port" "SELECT 1" >/dev/null || { log "$name failed to start"; tail -20 "$dir/error.log"; exit 1; }
  sql_root "$port" "CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PASSWORD';
    GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'%' WITH GRANT OPTION; FLUSH PRIVILEGES;"
  log "$name up on 127.0.0.1:$port (server-id $sid)"
}

mysqld_down() { # name
  local pidf="$STACK_DIR/$1/mariadbd.pid"
  if mysqld_alive "$1"; then
    local pid; pid=$(cat "$pidf")
    kill "$pid"
    for _ in $(seq 1 60); do pid_alive "$pid" || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
    log "$1 stopped"
  fi
}

pg_alive() { [ -f "$STACK_DIR/pg/data/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$STACK_DIR/pg/data" status >/dev/null 2>&1; }

pg_up() {
  if pg_alive; then log "postgres already running on $PG_PORT"; return; fi
  mkdir -p "$STACK_DIR/pg"
  [ "$(id -u)" = 0 ] && chown postgres: "$STACK_DIR/pg"
  if [ ! -f "$STACK_DIR/pg/data/PG_VERSION" ]; then
    as_pg "$PG_BIN/initdb" -D "$STACK_DIR/pg/data" -U postgres --auth=trust -E UTF8 >"$STACK_DIR/pg/initdb.log" 2>&1 \
      || { cat "$STACK_DIR/pg/initdb.log"; exit 1; }
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$STACK_DIR/pg/data" -l "$STACK_DIR/pg/server.log" -w -t 60 \
    -o "-p $PG_PORT -k $STACK_DIR/pg -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" start >/dev/null
  for db in airflow shardflow; do
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1 \
      || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "CREATE DATABASE $db"
  done
  log "postgres up on 127.0.0.1:$PG_PORT (databases airflow, shardflow)"
}

pg_down() {
  if pg_alive; then as_pg "$PG_BIN/pg_ctl" -D "$STACK_DIR/pg/data" -m fast -w stop >/dev/null; log "postgres stopped"; fi
}

status() {
  local rc=0
  for spec in "${MYSQLDS[@]}"; do
    set -- $spec
    if mysqld_alive "$1"; then log "$1: running on 127.0.0.1:$2"; else log "$1: stopped"; rc=1; fi
  done
  if pg_alive; then log "postgres: running on 127.0.0.1:$PG_PORT"; else log "postgres: stopped"; rc=1; fi
  return $rc
}

env_out() {  # SHARDFLOW_STACK_WORKER=0: the ports and directory printed are the worker's already
  cat <<EOV
export SHARDFLOW_UP1_PORT=$UP1_PORT SHARDFLOW_UP2_PORT=$UP2_PORT SHARDFLOW_DOWN_PORT=$DOWN_PORT SHARDFLOW_PG_PORT=$PG_PORT
export SHARDFLOW_STACK_USER=$DB_USER SHARDFLOW_STACK_PASSWORD=$DB_PASSWORD
export SHARDFLOW_STATE_DSN=postgresql://postgres@127.0.0.1:$PG_PORT/shardflow
export SHARDFLOW_STACK_DIR=$STACK_DIR SHARDFLOW_STACK_WORKER=0
export SHARDFLOW_AIRFLOW_PORT=$AIRFLOW_PORT SHARDFLOW_AIRFLOW_HOME=$STACK_DIR/airflow
export SHARDFLOW_AIRFLOW_URL=http://127.0.0.1:$AIRFLOW_PORT AIRFLOW_HOME=$STACK_DIR/airflow
EOV
}

job_host() { # start|stop|status [--master M]: the stack's Spark job host (dm_core/jobhost), under $STACK_DIR/job-host
  eval "$(env_out)"
  PYTHONPATH=$ROOT "$ROOT/.venv/bin/python" -m dm_core.jobhost "$@"
}

case "${1:-}" in
  up)
    for spec in "${MYSQLDS[@]}"; do mysqld_up $spec; done
    pg_up ;;
  down)
    [ -S "$STACK_DIR/job-host/host.sock" ] && job_host stop
    for spec in "${MYSQLDS[@]}"; do set -- $spec; mysqld_down "$1"; done
    pg_down ;;
  status) status ;;
  pg-bounce)  # stop Postgres, wait ${2:-5} s, start it again (tests: a state-store restart)
    pg_down; sleep "${2:-5}"; pg_up ;;
  env) env_out ;;
  job-host) shift; job_host "$@" ;;
  reset)  # wipe all data (used by tests that need a pristine upstream)
    "$0" down; rm -rf "$STACK_DIR" ;;
  *) echo "usage: $0 up|down|status|env|reset|pg-bounce [SECONDS]|job-host start|stop|status" >&2; exit 2 ;;
esac
