"""The host's side of the socket: one thread per client, one job at a time.

``run(request, sink)`` is the Spark side (spark_jobs/job_host.run_job): it runs the request's
job, writes what the job logs to ``sink`` (a text stream whose every line goes to the client
as it is written) and returns ``{"rc": N, "seconds": S}``.

A job lives as long as its client. A client sends nothing after its request, so its end of
the connection turns readable only when it closes: the Airflow task was stopped (dmctl
stop-task, a run marked failed) or its process died. Then a queued job is not started, and a
running one is cancelled: ``cancel()`` (the Spark side: cancel its Spark jobs) is called
every ``CANCEL_EVERY_S`` until the job returns, since its driver may start more. The job holds
the slot until it has returned, so a rerun of the task still never runs beside it.
"""

from __future__ import annotations

import io
import logging
import os
import select
import socket
import threading
from pathlib import Path

from dm_core.jobhost import wire

log = logging.getLogger("shardflow.jobhost")

ACCEPT_POLL_S = 0.5  # how soon the accept loop sees a stop
WATCH_POLL_S = 0.2   # how soon a job's watcher sees that the job ended
CANCEL_EVERY_S = 0.5  # a cancelled job's Spark jobs are cancelled again this often until it returns
QUEUE_CHECK_S = 0.2  # how soon a queued job whose client went away leaves the queue


def _not_started(what: str) -> None:
    log.info("job %s not started: its client went away while it waited (its task was stopped)", what)


class LineSink(io.TextIOBase):
    """A text stream whose lines go to a client as ``log`` messages while the job runs. A
    client that went away loses the rest (the job is being cancelled: ``_Client``)."""

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


class _Client:
    """One job's client, watched from a thread of its own while the job waits and runs."""

    def __init__(self, conn: socket.socket, what: str, cancel):
        self.conn, self.what, self.cancel = conn, what, cancel
        self.gone = threading.Event()      # the client closed its end
        self.running = threading.Event()   # the job holds the slot and runs
        self.ended = threading.Event()     # the job returned (or will never run)
        self._thread = threading.Thread(target=self._watch, name="jobhost-client-watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """The job is over: wait for the watcher, so that no cancel of this job reaches the next."""
        self.ended.set()
        self._thread.join()

    def _closed(self) -> bool | None:
        """True: the client closed; False: still there; None: it sent bytes it should not have."""
        try:
            readable, _, _ = select.select([self.conn], [], [], WATCH_POLL_S)
            if not readable:
                return False
            return True if not self.conn.recv(1, socket.MSG_PEEK) else None
        except OSError:
            return True

    def _watch(self) -> None:
        while not self.ended.is_set():
            closed = self._closed()
            if closed is None:
                log.warning("job %s: its client sent more than its request; it is no longer watched", self.what)
                return
            if closed:
                break
        else:
            return
        self.gone.set()
        while not self.ended.is_set():
            if self.running.is_set():
                log.warning("job %s: its client went away (its task was stopped, or its process died): cancelling "
                            "the job", self.what)
                break
            self.ended.wait(WATCH_POLL_S)   # queued: _run sees `gone` when its turn comes
        while not self.ended.is_set():
            try:
                self.cancel()
            except Exception as e:   # a Spark side that cannot cancel: the job runs to its end
                log.warning("job %s: cancelling it failed (%s); it runs to its end", self.what, e)
                return
            self.ended.wait(CANCEL_EVERY_S)


class Server:
    def __init__(self, path: Path, run, *, describe=dict, cancel=None):
        """``cancel()``: stop the running job's work (see the module's docstring); None: jobs
        whose client went away still run to their end."""
        self.path, self.run, self.describe, self.cancel = Path(path), run, describe, cancel
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
                self._run(request, stream, conn)
            else:
                wire.send(stream, {"kind": "done", "rc": 2, "error": f"unknown request {kind!r}"})
        except OSError as e:   # the client went away
            log.info("a client left: %s", e)
        finally:
            try:
                stream.close()   # flushes what a gone client never read
            except OSError:
                pass
            conn.close()

    def _run(self, request: dict, stream, conn: socket.socket) -> None:
        what = f"{request.get('job')} {' '.join(request.get('argv') or [])}"
        client = _Client(conn, what, self.cancel) if self.cancel is not None else None
        try:
            self._run_watched(request, stream, what, client)
        finally:
            if client is not None:
                client.close()

    def _run_watched(self, request: dict, stream, what: str, client: _Client | None) -> None:
        with self._counts:
            ahead = self.running + self.waiting
            self.waiting += 1
        if ahead:
            log.info("job %s queued behind %d job(s)", what, ahead)
            try:
                wire.send(stream, {"kind": "queued", "ahead": ahead})
            except OSError:
                with self._counts:
                    self.waiting -= 1
                raise
        started = False
        while not self.slot.acquire(timeout=QUEUE_CHECK_S):
            if client is not None and client.gone.is_set():   # leaves the queue now, not when its turn comes
                with self._counts:
                    self.waiting -= 1
                _not_started(what)
                return
        try:
            with self._counts:
                self.waiting -= 1
                self.running += 1
            try:
                if self.stopped.is_set():
                    wire.send(stream, {"kind": "done", "rc": None, "error": "the job host stopped before the job started"})
                    return
                if client is not None and client.gone.is_set():
                    _not_started(what)
                    return
                try:
                    wire.send(stream, {"kind": "started"})
                except OSError:   # it left since the check above
                    _not_started(what)
                    return
                log.info("job %s started", what)
                started = True
                sink = LineSink(stream)
                if client is not None:
                    client.running.set()
                answer = self.run(request, sink)
                if client is not None:
                    client.ended.set()   # stop cancelling: the job has returned
                sink.flush()
                cancelled = client is not None and client.gone.is_set()
                log.info("job %s ended: exit code %s in %.1fs%s", what, answer.get("rc"), answer.get("seconds", 0),
                         " (cancelled: its client went away)" if cancelled else "")
                if not sink.lost and not cancelled:
                    wire.send(stream, {"kind": "done", **answer})
            finally:
                if client is not None:
                    client.close()   # inside the slot: no cancel of this job reaches the next
                with self._counts:
                    self.running -= 1
                    self.jobs += started
        finally:
            self.slot.release()
