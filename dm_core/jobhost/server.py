"""The host's side of the socket: one thread per client, one job at a time.

``run(request, sink)`` is the Spark side (spark_jobs/job_host.run_job): it runs the request's
job, writes what the job logs to ``sink`` (a text stream whose every line goes to the client
as it is written) and returns ``{"rc": N, "seconds": S}``.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import threading
from pathlib import Path

from dm_core.jobhost import wire

log = logging.getLogger("shardflow.jobhost")

ACCEPT_POLL_S = 0.5  # how soon the accept loop sees a stop


class LineSink(io.TextIOBase):
    """A text stream whose lines go to a client as ``log`` messages while the job runs. A
    client that went away loses the rest; the job goes on (its progress is recorded as it goes)."""

    def __init__(self, stream):
        self._stream, self._buf, self._lock, self.lost = stream, "", threading.Lock(), False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._buf += text
            *lines, self._buf = self._buf.split("\n")
            for line in lines:
                self._send(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._buf:
                self._send(self._buf)
                self._buf = ""

    def _send(self, line: str) -> None:
        if self.lost:
            return
        try:
            wire.send(self._stream, {"kind": "log", "text": line})
        except OSError:
            self.lost = True


class Server:
    def __init__(self, path: Path, run, *, describe=dict):
        self.path, self.run, self.describe = Path(path), run, describe
        self.slot = threading.Lock()          # held by the running job
        self._counts = threading.Lock()
        self.running = self.waiting = self.jobs = 0
        self.stopped = threading.Event()
        self._listener: socket.socket | None = None

    def listen(self) -> None:
        """Bind the socket; a socket file nobody answers on (a host that was killed) is replaced."""
        wire.private_dir(self.path.parent)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()
            else:
                raise RuntimeError(f"a job host already listens on {self.path}")
            finally:
                probe.close()
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._listener.listen(16)
        self._listener.settimeout(ACCEPT_POLL_S)

    def serve(self) -> None:
        """Accept clients until a ``stop`` request (or ``stop()``)."""
        while not self.stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            threading.Thread(target=self._client, args=(conn,), name="jobhost-client", daemon=True).start()
        self._listener.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def stop(self) -> None:
        self.stopped.set()

    def drain(self) -> None:
        """Wait for the running job; jobs still queued are told the host stopped."""
        self.stop()
        self.slot.acquire()

    def status(self) -> dict:
        with self._counts:
            return {"kind": "status", "pid": os.getpid(), "running": self.running, "waiting": self.waiting,
                    "jobs": self.jobs, **self.describe()}

    def _client(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        stream = conn.makefile("rwb")
        try:
            if wire.peer_uid(conn) != os.getuid():
                log.warning("refused a client of another user (uid %d)", wire.peer_uid(conn))
                return
            request = wire.receive(stream)
            kind = (request or {}).get("kind")
            if kind == "status":
                wire.send(stream, self.status())
            elif kind == "stop":
                log.info("stop requested: no new jobs; the running one finishes")
                self.stop()   # before the answer: a client told "stopping" must find the host stopped
                wire.send(stream, {"kind": "stopping"})
            elif kind == "run":
                self._run(request, stream)
            else:
                wire.send(stream, {"kind": "done", "rc": 2, "error": f"unknown request {kind!r}"})
        except OSError as e:   # the client went away
            log.info("a client left: %s", e)
        finally:
            stream.close()
            conn.close()

    def _run(self, request: dict, stream) -> None:
        what = f"{request.get('job')} {' '.join(request.get('argv') or [])}"
        with self._counts:
            ahead = self.running + self.waiting
            self.waiting += 1
        if ahead:
            log.info("job %s queued behind %d job(s)", what, ahead)
            wire.send(stream, {"kind": "queued", "ahead": ahead})
        with self.slot:
            with self._counts:
                self.waiting -= 1
                self.running += 1
            try:
                if self.stopped.is_set():
                    wire.send(stream, {"kind": "done", "rc": None, "error": "the job host stopped before the job started"})
                    return
                log.info("job %s started", what)
                wire.send(stream, {"kind": "started"})
                sink = LineSink(stream)
                answer = self.run(request, sink)
                sink.flush()
                log.info("job %s ended: exit code %s in %.1fs", what, answer.get("rc"), answer.get("seconds", 0))
                if not sink.lost:
                    wire.send(stream, {"kind": "done", **answer})
            finally:
                with self._counts:
                    self.running -= 1
                    self.jobs += 1
