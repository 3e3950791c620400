#!/usr/bin/env bash
# A Celery worker of the local stack as a host of its own (SHARDFLOW_CELERY_NETNS=1 for
# scripts/airflow_celery.sh): a network namespace whose only way out is a veth pair to this
# machine, and TCP forwarders (socat) that carry the worker's connections to the stack's servers
# over that link. The servers keep listening on 127.0.0.1 only. Inside the namespace a forwarder
# listens on 127.0.0.1:PORT for each server and connects to the machine's end of the veth
# (10.<100 + KEY>.<N>.1); there a forwarder bound to that address alone connects to
# 127.0.0.1:PORT. So the worker keeps its configuration (the 127.0.0.1 addresses of the task
# files and DSNs), and every connection it makes crosses its own link, as a separate machine's
# would. Unix sockets (the Spark job host's) are files and reach through unchanged.
# Needs root (ip netns, veth) and socat.
# KEY tells the stacks apart (scripts/airflow_celery.sh passes its Airflow port / 100: 80-89).
#   scripts/celery_netns.sh up KEY N DIR PORT...   the namespace of worker N, forwarders for PORTs (pids in DIR)
#   scripts/celery_netns.sh down KEY N DIR         the forwarders stopped, the veth and namespace deleted
#   scripts/celery_netns.sh name KEY N             the namespace's name (for `ip netns exec`)
set -euo pipefail
. "$(dirname "$0")/pid_alive.sh"

log() { printf '[celery-netns] %s\n' "$*"; }
ns_of() { echo "shardflow-$KEY-w$1"; }

up() {  # n dir port...
  local n=$1 dir=$2; shift 2
  local ns host_if ns_if net
  ns=$(ns_of "$n"); host_if="sf${KEY}h$n"; ns_if="sf${KEY}n$n"; net="10.$((100 + KEY % 150)).$n"
  command -v socat >/dev/null || { log "socat is missing (apt-get install socat)"; exit 1; }
  [ $# -gt 0 ] || { log "worker$n: no port to forward"; exit 1; }
  mkdir -p "$dir"
  if ! ip netns list | grep -qw "$ns"; then
    ip netns add "$ns"
    ip link add "$host_if" type veth peer name "$ns_if"
    ip link set "$ns_if" netns "$ns"
    ip addr add "$net.1/30" dev "$host_if"
    ip link set "$host_if" up
    ip netns exec "$ns" ip addr add "$net.2/30" dev "$ns_if"
    ip netns exec "$ns" ip link set "$ns_if" up
    ip netns exec "$ns" ip link set lo up
  fi
  local port
  for port in "$@"; do
    forward "$dir/host-$port.pid" socat "TCP-LISTEN:$port,bind=$net.1,fork,reuseaddr" "TCP:127.0.0.1:$port"
    forward "$dir/ns-$port.pid" ip netns exec "$ns" socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" \
      "TCP:$net.1:$port"
  done
  log "worker$n: namespace $ns ($net.2), link $host_if, ports $* forwarded"
}

forward() {  # pidfile cmd...: one forwarder in a process group of its own (its per-connection children with it)
  local pidf=$1; shift
  if [ -f "$pidf" ] && pid_alive "$(cat "$pidf")"; then return; fi
  setsid "$@" </dev/null >/dev/null 2>&1 &
  echo $! >"$pidf"
}

down() {  # n dir
  local n=$1 dir=$2 ns pidf
  ns=$(ns_of "$n")
  for pidf in "$dir"/host-*.pid "$dir"/ns-*.pid; do
    [ -f "$pidf" ] || continue
    kill -TERM -- "-$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf"
  done
  ip link del "sf${KEY}h$n" 2>/dev/null || true   # (its peer in the namespace goes with it)
  if ip netns list | grep -qw "$ns"; then ip netns del "$ns"; fi
  log "worker$n: namespace $ns removed"
}

KEY=${2:?KEY}
case "${1:-}" in
  up) up "${3:?N}" "${4:?DIR}" "${@:5}" ;;
  down) down "${3:?N}" "${4:?DIR}" ;;
  name) ns_of "${3:?N}" ;;
  *) echo "usage: $0 up KEY N DIR PORT... | down KEY N DIR | name KEY N" >&2; exit 2 ;;
esac
