"""``python -m dm_core.jobhost start|run|stop|restart|status``: this machine's job host (service.py)."""

from __future__ import annotations

import argparse
import json
import sys

from dm_core.jobhost import service, wire


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dm_core.jobhost", description="shardflow's Spark job host")
    p.add_argument("action", choices=("start", "run", "stop", "restart", "status"),
                   help="run: the host in the foreground, for a supervisor (systemd, a sidecar container)")
    p.add_argument("--master", default=None, help="the host's Spark master (default $SHARDFLOW_JOB_HOST_MASTER "
                                                   "or local[2]); jobs whose connection names another keep spark-submit")
    p.add_argument("--detach", action="store_true", help="start: return at once, without waiting for the host")
    args = p.parse_args(argv)
    where = wire.host_dir()
    if args.action == "start":
        pid = service.start(where, master=args.master, wait=not args.detach)
        print(f"job host pid {pid} on {wire.socket_path(where)} (log {where / 'host.log'})")
    elif args.action == "run":
        try:
            service.run_foreground(where, master=args.master)   # returns only if it could not start
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
    elif args.action == "restart":   # after its running job (stop), with the code on disk now
        service.stop(where)
        pid = service.start(where, master=args.master, wait=not args.detach)
        print(f"job host restarted: pid {pid} on {wire.socket_path(where)} (log {where / 'host.log'})")
    elif args.action == "stop":
        print("job host stopped" if service.stop(where) else "no job host was running")
    else:
        got = service.status(where)
        print(json.dumps(got) if got else f"no job host answers on {wire.socket_path(where)}")
        return 0 if got else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
