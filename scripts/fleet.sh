#!/usr/bin/env bash
# A fleet of upstream MariaDB servers for the fleet test and benchmark (`make fleet-up N=16`):
# N servers on 127.0.0.1, ports SHARDFLOW_FLEET_PORT (default 21000) .. +N-1, server ids 1001..,
# binlog ROW with FULL row images and FULL row metadata (as the local stack's up1), each sized
# for many on one machine: a 32M buffer pool, no performance_schema, small redo log and caches
# (about 90 MB RSS each when idle). The data lives under SHARDFLOW_FLEET_DIR (default .fleet/).
# The downstream and the state store are the local stack's (scripts/stack.sh): the fleet is only
# the upstreams. tests/fleet/workload.py fills them with shard tables and writes.
#   scripts/fleet.sh up [N] | down | status | env | reset
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pid_alive.sh"
FLEET_DIR=${SHARDFLOW_FLEET_DIR:-$ROOT/.fleet}
BASE_PORT=${SHARDFLOW_FLEET_PORT:-21000}
ROW_METADATA=${SHARDFLOW_FLEET_ROW_METADATA:-FULL}
DB_USER=${SHARDFLOW_STACK_USER:-shardflow}
# loopback-only servers for tests: this default is not a secret (as scripts/stack.sh's)
DB_PASSWORD=${SHARDFLOW_STACK_PASSWORD:-shardflow-local}

log() { printf '[fleet] %s\n' "$*"; }

count() {  # how many servers the fleet has (the directories up made), or $1 when given
  if [ -n "${1:-}" ]; then echo "$1"; return; fi
  local n=0
  while [ -d "$FLEET_DIR/up$((n + 1))" ]; do n=$((n + 1)); done
  echo "$n"
}

port_of() { echo $((BASE_PORT + $1 - 1)); }

alive() {  # i
  local pidf="$FLEET_DIR/up$1/mariadbd.pid"
  [ -f "$pidf" ] && pid_alive "$(cat "$pidf")"
}

sql_root() {  # port sql
  mariadb --no-defaults -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 -e "$2"
}

template() {  # one initialised data directory, copied for each server (an install costs seconds each)
  local t="$FLEET_DIR/template"
  if [ ! -d "$t/mysql" ]; then
    rm -rf "$t"
    mkdir -p "$FLEET_DIR/install-tmp"   # not /tmp: a starting mariadbd deletes the #sql* files there (stack.sh)
    mariadb-install-db --no-defaults --datadir="$t" --user="$(id -un)" --tmpdir="$FLEET_DIR/install-tmp" \
      --auth-root-authentication-method=normal >"$FLEET_DIR/install.log" 2>&1 \
      || { cat "$FLEET_DIR/install.log"; exit 1; }
  fi
}

start_one() {  # i
  local i=$1 port dir="$FLEET_DIR/up$1"
  port=$(port_of "$i")
  if alive "$i"; then return; fi
  mkdir -p "$dir/tmp"
  [ -d "$dir/data/mysql" ] || cp -a "$FLEET_DIR/template" "$dir/data"
  local args=(--no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --port="$port" --socket="$dir/mariadbd.sock"
    --pid-file="$dir/mariadbd.pid" --bind-address=127.0.0.1 --user="$(id -un)" --server-id=$((1000 + i))
    --log-error="$dir/error.log" --skip-name-resolve --character-set-server=utf8mb4
    --collation-server=utf8mb4_general_ci --innodb-autoinc-lock-mode=2
    --innodb-flush-log-at-trx-commit=2 --sync-binlog=0
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --innodb-log-buffer-size=4M
    --performance-schema=OFF --key-buffer-size=4M --aria-pagecache-buffer-size=8M
    --table-open-cache=400 --table-definition-cache=400 --thread-cache-size=8 --max-connections=200
    --log-bin=mysql-bin --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata="$ROW_METADATA"
    --max-binlog-size=128M --expire-logs-days=2)
  setsid mariadbd "${args[@]}" </dev/null >/dev/null 2>&1 &
}

wait_one() {  # i
  local i=$1 port
  port=$(port_of "$i")
  for _ in $(seq 1 120); do
    sql_root "$port" "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.5
  done
  sql_root "$port" "SELECT 1" >/dev/null || { log "up$i failed to start"; tail -20 "$FLEET_DIR/up$i/error.log"; exit 1; }
  sql_root "$port" "CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PASSWORD';
    GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'%' WITH GRANT OPTION; FLUSH PRIVILEGES;"
}

stop_one() {  # i
  local pidf="$FLEET_DIR/up$1/mariadbd.pid" pid
  alive "$1" || return 0
  pid=$(cat "$pidf")
  kill "$pid"
  for _ in $(seq 1 60); do pid_alive "$pid" || return 0; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
  up)
    n=${2:-${N:-16}}
    [ "$n" -ge 1 ] || { echo "usage: $0 up N (N >= 1)" >&2; exit 2; }
    have=$(count)
    if [ "$have" -gt "$n" ]; then log "the fleet has $have servers; make fleet-down first to shrink it"; exit 1; fi
    template
    for i in $(seq 1 "$n"); do start_one "$i"; done
    for i in $(seq 1 "$n"); do wait_one "$i"; done
    log "$n upstreams up on 127.0.0.1:$(port_of 1)..$(port_of "$n") (binlog ROW, row metadata $ROW_METADATA)" ;;
  down)
    n=$(count)
    for i in $(seq 1 "$n"); do stop_one "$i" & done
    wait
    [ "$n" -gt 0 ] && log "$n upstreams stopped"
    true ;;
  status)
    n=$(count); rc=0; up=0
    for i in $(seq 1 "$n"); do if alive "$i"; then up=$((up + 1)); else log "up$i (port $(port_of "$i")): stopped"; rc=1; fi; done
    log "$up of $n upstreams running"
    [ "$n" -gt 0 ] || rc=1
    exit $rc ;;
  env)  # the ports, for the workload and tests
    n=$(count)
    ports=$(for i in $(seq 1 "$n"); do printf '%s,' "$(port_of "$i")"; done)
    echo "export SHARDFLOW_FLEET_PORTS=${ports%,} SHARDFLOW_FLEET_DIR=$FLEET_DIR" ;;
  reset)
    "$0" down; rm -rf "$FLEET_DIR" ;;
  *) echo "usage: $0 up [N] | down | status | env | reset" >&2; exit 2 ;;
esac
