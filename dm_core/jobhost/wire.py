"""Where a job host listens and how its messages are framed.

Requests (client → host, one line)::

    {"kind": "run", "job": "full_load", "argv": ["--task", "t"], "env": {...}}
    {"kind": "status"}
    {"kind": "stop"}

Answers (host → client, one line each)::

    {"kind": "queued", "ahead": 1}              the job waits for the jobs ahead of it
    {"kind": "started"}
    {"kind": "log", "text": "..."}              one line the job logged or printed
    {"kind": "done", "rc": 0, "seconds": 1.2}   the job's exit code, as spark-submit's would be
    {"kind": "status", "pid": ..., "master": ..., "running": 0, "waiting": 0, "jobs": 3}
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

SOCKET_NAME = "host.sock"


def host_dir() -> Path:
    """The directory of this machine's (or this stack's) host: ``SHARDFLOW_JOB_HOST_DIR``, else
    ``$SHARDFLOW_STACK_DIR/job-host``, else ``~/.shardflow/job-host``."""
    given = os.environ.get("SHARDFLOW_JOB_HOST_DIR")
    if given:
        return Path(given)
    stack = os.environ.get("SHARDFLOW_STACK_DIR")
    return Path(stack) / "job-host" if stack else Path.home() / ".shardflow" / "job-host"


def private_dir(path: Path) -> Path:
    """``path``, created if needed, entered by its owner only (the socket's first guard)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def socket_path(directory: Path | None = None) -> Path:
    return (directory or host_dir()) / SOCKET_NAME


def send(stream, message: dict) -> None:
    stream.write((json.dumps(message) + "\n").encode())
    stream.flush()


def receive(stream) -> dict | None:
    """The next message, or None at the end of the connection."""
    line = stream.readline()
    return json.loads(line) if line.strip() else None


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (Linux)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]
