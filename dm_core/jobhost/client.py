"""A job sent to a running host: its log lines to a callback while it runs, its exit code back."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from dm_core.jobhost import wire

CONNECT_TIMEOUT_S = 5   # a host that takes longer to accept is as good as down


class HostUnavailable(Exception):
    """No host took the job (none listens, or it stopped before the job started): nothing of
    the job ran, so a spark-submit of its own may run it instead."""


class HostLost(Exception):
    """The host ended while the job ran (killed, out of memory): the job may have done part of
    its work, which a rerun converges from (its progress is recorded after each commit)."""


def _connect(path: Path):
    conn = socket.socket(socket.AF_UNIX)
    conn.settimeout(CONNECT_TIMEOUT_S)
    try:
        conn.connect(str(path))
    except OSError as e:
        conn.close()
        raise HostUnavailable(f"no job host answers on {path}: {e.strerror or e}") from None
    return conn


def _ask(path: Path, request: dict) -> dict:
    conn = _connect(path)
    try:
        stream = conn.makefile("rwb")
        wire.send(stream, request)
        got = wire.receive(stream)
    except OSError as e:
        raise HostUnavailable(f"the job host on {path} did not answer: {e}") from None
    finally:
        conn.close()
    if got is None:
        raise HostUnavailable(f"the job host on {path} closed the connection")
    return got


def status(path: Path | None = None) -> dict:
    """The host's pid, master, jobs running and waiting; HostUnavailable when none runs."""
    return _ask(path or wire.socket_path(), {"kind": "status"})


def request_stop(path: Path | None = None) -> None:
    _ask(path or wire.socket_path(), {"kind": "stop"})


def shardflow_env(environ=None) -> dict:
    """The driver environment a job takes from its client: every ``SHARDFLOW_*`` variable (the
    host drops for the job those it has and the client has not)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith("SHARDFLOW_")}


def run(job: str, argv: list[str], *, env: dict, on_line, on_note=None, path: Path | None = None,
        on_connected=None) -> int:
    """Run ``job`` on the host and return its exit code. ``on_line(text)`` gets each line the
    job logs, as it logs it; ``on_note(text)`` what the host says about the job (queued);
    ``on_connected(conn)`` the connection, whose shutdown cancels the job (server.py)."""
    path = path or wire.socket_path()
    conn = _connect(path)
    if on_connected is not None:
        on_connected(conn)
    conn.settimeout(None)    # a job runs for as long as it needs
    started = False
    try:
        stream = conn.makefile("rwb")
        wire.send(stream, {"kind": "run", "job": job, "argv": list(argv), "env": env, "env_exact": True})
        while True:
            msg = wire.receive(stream)
            if msg is None:
                break
            kind = msg.get("kind")
            if kind == "log":
                on_line(msg["text"])
            elif kind == "queued" and on_note:
                on_note(f"the job host runs one job at a time: this one waits for {msg['ahead']} job(s) ahead of it")
            elif kind == "started":
                started = True
            elif kind == "done":
                if msg.get("rc") is None:
                    raise HostUnavailable(msg.get("error") or "the job host did not run the job")
                return int(msg["rc"])
    except OSError as e:
        if not started:
            raise HostUnavailable(f"the job host on {path} went away before the job started: {e}") from None
        raise HostLost(f"the job host on {path} went away while {job} ran: {e}") from None
    finally:
        conn.close()
    if not started:
        raise HostUnavailable(f"the job host on {path} went away before the job started")
    raise HostLost(f"the job host on {path} ended while {job} ran (killed?): rerun the task; the work "
                   "recorded so far is kept")
