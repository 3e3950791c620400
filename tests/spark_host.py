"""The test session's Spark application (spark_jobs/job_host.py): one per pytest process,
started at the first full load that can use it, stopped when the process exits.

``run_load`` (tests/integration/test_full_support.py) sends a load here unless it tests the
process itself: a fault point armed on executors (their environment is fixed at start), a
master other than local[2], or ``SHARDFLOW_TEST_SPARK=submit`` in the environment (every load
then gets its own spark-submit, as before). Its answer looks like spark-submit's
``CompletedProcess``: the exit code, and the job's log as ``stderr``. The same application also
serves jobs on ``SparkHost.socket``, as the product's job host does (dm_core/jobhost). The
host's own output (Spark's, the executors') goes to ``$SHARDFLOW_STACK_DIR/spark-host-<pid>.log``.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from spark_jobs.job_host import DONE_MARK, EXECUTOR_ENV, READY_MARK

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 180


class SparkHost:
    def __init__(self, cmd: list[str], env: dict, log_path: Path):
        env = {k: v for k, v in env.items() if k not in EXECUTOR_ENV}
        self.env = env
        self.log_path = log_path
        self.answers: queue.Queue = queue.Queue()
        self.log = open(log_path, "a", buffering=1)
        self.dir = tempfile.mkdtemp(prefix="spark-host-")
        fifo = os.path.join(self.dir, "requests")
        os.mkfifo(fifo)
        self.socket = Path(self.dir) / "host.sock"   # the product's way in (dm_core/jobhost), same application
        self.proc = subprocess.Popen([*cmd, "--requests", fifo, "--socket", str(self.socket)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True, cwd=ROOT, start_new_session=True)
        threading.Thread(target=self._read, name="spark-host-reader", daemon=True).start()
        self._await(READY_MARK, START_TIMEOUT_S, "start")
        self.requests = self._open_requests(fifo)

    def _open_requests(self, fifo: str):
        """The writing end of the requests pipe, once the host opened its reading end."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)   # ENXIO while no reader has it open
                break
            except OSError as e:
                if e.errno != errno.ENXIO or not self.alive() or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"the test session's Spark application did not open its requests: "
                                       f"see {self.log_path}") from e
                time.sleep(0.02)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "w")

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(READY_MARK) or line.startswith(DONE_MARK):
                self.answers.put(line.rstrip("\n"))
            else:
                self.log.write(line)
        self.answers.put(None)   # the application ended

    def _await(self, mark: str, timeout: float, what: str) -> str:
        try:
            got = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise subprocess.TimeoutExpired(self.proc.args, timeout) from None
        if got is None or not got.startswith(mark):
            self.close()
            raise RuntimeError(f"the test session's Spark application ended during {what}: see {self.log_path}")
        return got

    def alive(self) -> bool:
        return self.proc.poll() is None

    def env_delta(self, wanted: dict) -> dict:
        """The driver environment a job needs beyond the host's (shardflow's variables only)."""
        keys = {k for k in (*wanted, *self.env) if k.startswith("SHARDFLOW_")}
        return {k: wanted.get(k) for k in keys if wanted.get(k) != self.env.get(k)}

    def run(self, job: str, argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
        fd, answer = tempfile.mkstemp(prefix="spark-host-", suffix=".json")
        os.close(fd)
        try:
            request = {"job": job, "argv": argv, "env": env, "answer": answer}
            self.requests.write(json.dumps(request) + "\n")
            self.requests.flush()
            self._await(DONE_MARK, timeout, f"{job} {' '.join(argv)}")
            got = json.loads(Path(answer).read_text())
        finally:
            os.unlink(answer)
        return subprocess.CompletedProcess(["job host", job, *argv], got["rc"], got.get("out", ""), got["log"])

    def close(self) -> None:
        if self.proc.poll() is None and getattr(self, "requests", None) is not None:
            try:
                self.requests.close()   # the host's end of the requests: it stops
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_host: SparkHost | None = None
_lock = threading.Lock()


def shared_host(cmd: list[str], env: dict) -> SparkHost:
    """This process's host, started now if it is not running."""
    global _host
    with _lock:
        if _host is None or not _host.alive():
            stack = Path(os.environ.get("SHARDFLOW_STACK_DIR") or ROOT / ".stack")
            stack.mkdir(parents=True, exist_ok=True)
            _host = SparkHost(cmd, env, stack / f"spark-host-{os.getpid()}.log")
        return _host


def usable(master: str, env: dict) -> bool:
    """Whether a load with this master and driver environment can run on the shared host."""
    return (master == "local[2]" and os.environ.get("SHARDFLOW_TEST_SPARK") != "submit"
            and not any(env.get(k) for k in EXECUTOR_ENV))


@atexit.register
def _stop() -> None:
    if _host is not None:
        _host.close()
