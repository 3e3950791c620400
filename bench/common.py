"""Plumbing shared by the benchmarks: the stack, SQL helpers, timing, memory, results, tables.

Every benchmark part returns plain dicts (JSON-ready). A baseline that cannot run (tool
missing, server refusing) is recorded as ``{"error": reason}`` by ``guarded`` and its
ratios become null: a broken baseline never crashes the run.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from dm_core.db import Endpoint, connect, qi

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
VENV_BIN = ROOT / ".venv" / "bin"
JDBC_JAR = os.environ.get("SHARDFLOW_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar")

log = logging.getLogger("bench")


class Skipped(Exception):
    """A baseline cannot run here; the message says why (it goes into the results)."""


# ---- the local stack ----------------------------------------------------------------------
@dataclass(frozen=True)
class Stack:
    up1: Endpoint
    up2: Endpoint
    down: Endpoint
    state_dsn: str

    @property
    def ups(self) -> list[Endpoint]:
        return [self.up1, self.up2]


def _stack_sh_env() -> dict[str, str]:
    out = subprocess.run([str(ROOT / "scripts" / "stack.sh"), "env"], capture_output=True, text=True,
                         check=True).stdout
    env = {}
    for line in out.splitlines():
        for part in line.replace("export ", "").split():
            k, _, v = part.partition("=")
            env[k] = v
    return env


def stack_from_env() -> Stack:
    """The stack of `scripts/stack.sh` (its `env` output fills in what the environment lacks).

    `make bench` does not eval `stack.sh env`, so the defaults come from the script itself.
    SHARDFLOW_STATE_DSN is exported for the subprocesses (spark-submit reads it).
    """
    env = {**_stack_sh_env(), **{k: v for k, v in os.environ.items() if k.startswith("SHARDFLOW_")}}
    os.environ.setdefault("SHARDFLOW_STATE_DSN", env["SHARDFLOW_STATE_DSN"])
    user, pw = env["SHARDFLOW_STACK_USER"], env["SHARDFLOW_STACK_PASSWORD"]

    def ep(key: str, name: str) -> Endpoint:
        return Endpoint("127.0.0.1", int(env[key]), user, pw, name=name)

    return Stack(ep("SHARDFLOW_UP1_PORT", "up1"), ep("SHARDFLOW_UP2_PORT", "up2"),
                 ep("SHARDFLOW_DOWN_PORT", "down"), env["SHARDFLOW_STATE_DSN"])


# ---- SQL ----------------------------------------------------------------------------------
def execute(ep: Endpoint, *stmts: str, session: tuple[str, ...] = ()) -> None:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            for s in (*session, *stmts):
                cur.execute(s)
    finally:
        conn.close()


def query(ep: Endpoint, sql: str, args=None) -> list[tuple]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def bench_schema(name: str) -> str:
    """Quote a schema name after checking it is ours: benchmarks only touch bench_*."""
    if not name.startswith("bench_"):
        raise ValueError(f"benchmarks only touch schemas named bench_*, not {name!r}")
    return qi(name)


def drop_schemas(ep: Endpoint, prefix: str) -> None:
    """Drop every schema whose name starts with ``prefix`` (itself bench_...)."""
    bench_schema(prefix)
    names = [r[0] for r in query(ep, "SELECT schema_name FROM information_schema.schemata")
             if r[0].startswith(prefix)]
    execute(ep, *[f"DROP DATABASE IF EXISTS {bench_schema(n)}" for n in names])


def settle(*eps: Endpoint, timeout: float = 20.0) -> None:
    """Let the servers finish background work (dirty pages from earlier engines) before a
    timed run, so no engine pays for the one before it. Waits until every server's dirty
    page count is near zero, flushing eagerly meanwhile, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for ep in eps:
        conn = connect(ep)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
                old = cur.fetchone()[0]
                cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
                try:
                    while time.monotonic() < deadline:
                        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                        if int(cur.fetchone()[1]) < 50:
                            break
                        time.sleep(0.1)
                finally:
                    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = %s", (old,))
        except Exception as e:  # a server we may not tune: measure anyway
            log.info("cannot settle %s: %s", ep, e)
        finally:
            conn.close()


# ---- measuring ------------------------------------------------------------------------------
def per_second(n: float | None, seconds: float | None) -> float | None:
    return n / seconds if n is not None and seconds else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def figures(rows: int, nbytes: int | None, seconds: float, peak_rss: int | None = None, *, with_rss: bool = True,
            **extra: Any) -> dict:
    """The raw figures every engine reports (``with_rss=False``: a part that measures no memory)."""
    out = {
        "rows": rows, "bytes": nbytes, "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds else None,
        "mb_per_s": round(nbytes / seconds / 1e6, 2) if nbytes and seconds else None,
        "peak_rss_mb": round(peak_rss / 2**20, 1) if peak_rss else None,
        **extra,
    }
    if not with_rss:
        del out["peak_rss_mb"]
    return out


def guarded(name: str, fn: Callable[..., dict], *args, **kwargs) -> dict:
    """Run one engine; a failure becomes ``{"error": reason}`` instead of ending the run."""
    log.info("--- %s", name)
    try:
        out = fn(*args, **kwargs)
        log.info("    %s: %s", name, _brief(out))
        return out
    except Skipped as e:
        log.warning("    %s skipped: %s", name, e)
        return {"rows_per_s": None, "seconds": None, "error": str(e)}
    except Exception as e:  # a baseline's failure is a result, not a crash
        log.error("    %s failed: %s\n%s", name, e, traceback.format_exc())
        return {"rows_per_s": None, "seconds": None, "error": f"{type(e).__name__}: {e}"}


def _brief(out: dict) -> str:
    keys = ("rows", "seconds", "rows_per_s", "mb_per_s", "peak_rss_mb", "p50_s", "p99_s")
    return ", ".join(f"{k}={out[k]}" for k in keys if out.get(k) is not None)


def median_run(runs: list[dict]) -> dict:
    """The run of median rows/s (a failed run counts as the slowest), with every run's
    seconds beside it: a part that alternates its engines in rounds reports each engine's median
    run, and judges by the ratio of two medians of one run. A lag measured in any round travels
    with it."""
    ranked = sorted(runs, key=lambda r: r.get("rows_per_s") or 0.0)
    out = dict(ranked[len(ranked) // 2])
    lag = next((r["lag"] for r in runs if r.get("lag") is not None), None)
    if lag is not None:
        out["lag"] = lag
    out["rounds_seconds"] = [r.get("seconds") for r in runs]
    out["rows_ok"] = all(r.get("rows_ok", False) for r in runs)   # one wrong round fails the engine
    errors = [r["error"] for r in runs if r.get("error")]
    if errors:
        out["round_errors"] = errors
    return out


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> tuple[str, float] | None:
    """(command name, user+system CPU-seconds so far) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            head, rest = f.read().rsplit(")", 1)
    except OSError:
        return None
    fields = rest.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / _TICK


def server_pids(ports) -> dict[int, int]:
    """port -> pid of the local stack's mariadbd listening there (by its --port argument)."""
    want = {f"--port={p}": p for p in ports}
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if args and os.path.basename(args[0]) in ("mariadbd", "mysqld"):
            for a in args:
                if a in want:
                    found[want[a]] = int(d)
    return found


def _kind_of(pid: int, comm: str) -> str:
    """A process's kind for the CPU figures: PySpark's executor-side Python (its daemon and
    the workers it forks) apart from the driver's."""
    if not comm.startswith("python"):
        return comm
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return "python"
    return "python executors" if "pyspark.daemon" in cmd or "pyspark/daemon" in cmd else "python driver"


class ServerCPU:
    """CPU-seconds the stack's servers spend inside the block: ``{name: seconds}``."""

    def __init__(self, named_ports: dict[str, int], named_pids: dict[str, int] | None = None):
        """``named_pids``: servers outside the stack (the incremental part's private replica)."""
        pids = server_pids(named_ports.values()) if named_ports else {}
        self.pids = {name: pids.get(port) for name, port in named_ports.items()} | (named_pids or {})
        self.seconds: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            got = _cpu_of(pid) if pid else None
            out[name] = got[1] if got else 0.0
        return out

    def __enter__(self) -> "ServerCPU":
        self._t0 = self._now()
        return self

    def __exit__(self, *exc) -> None:
        end = self._now()
        self.seconds = {k: round(end[k] - self._t0[k], 1) for k in end}


class TreeRSS:
    """Peak resident memory of some processes plus all their descendants, sampled; and the
    CPU-seconds of every process of the trees, by kind (``cpu_by_kind``).

    Sums VmRSS over the process trees every ``interval`` seconds (from /proc) and keeps the
    maximum: spark-submit's JVM and its Python workers, or mydumper+myloader. Sampling can
    miss a short spike; it is a figure to compare, not an exact high-water mark. CPU is the
    last sample of each process (up to ``interval`` of a process's last moments is missed).
    """

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.roots: set[int] = set()
        self.peak = 0
        self.peak_by_kind: dict[str, int] = {}   # the highest sum of one kind's processes in one sample
        self.cpu: dict[int, tuple[str, float, str]] = {}   # pid -> (kind, CPU-seconds, command name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._page = os.sysconf("SC_PAGE_SIZE")

    def __enter__(self) -> "TreeRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def watch(self, pid: int) -> None:
        self.roots.add(pid)

    def _sample(self) -> int:
        parent: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        tree = {p for p in self.roots if p in parent}
        grew = True
        while grew:
            new = {p for p, pp in parent.items() if pp in tree and p not in tree}
            tree |= new
            grew = bool(new)
        total, by_kind = 0, {}
        for p in tree:
            try:
                with open(f"/proc/{p}/statm") as f:
                    rss = int(f.read().split()[1]) * self._page
            except (OSError, IndexError, ValueError):
                rss = 0
            total += rss
            got = _cpu_of(p)
            if got is not None:
                known = self.cpu.get(p)  # a kind is kept unless the process exec'd (bash -> java)
                kind = known[0] if known and known[2] == got[0] else _kind_of(p, got[0])
                self.cpu[p] = (kind, got[1], got[0])
                by_kind[kind] = by_kind.get(kind, 0) + rss
        for kind, rss in by_kind.items():
            self.peak_by_kind[kind] = max(self.peak_by_kind.get(kind, 0), rss)
        return total

    def peak_mb_by_kind(self) -> dict[str, float]:
        """Each kind's own peak (MB): they need not fall in the same sample as the total's."""
        return {k: round(v / (1 << 20), 1) for k, v in sorted(self.peak_by_kind.items())}

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU-seconds of the trees' processes by command name (java, python, mydumper ...)."""
        out: dict[str, float] = {}
        for kind, sec, _comm in self.cpu.values():
            out[kind] = round(out.get(kind, 0.0) + sec, 1)
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.roots:
                self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)


def run_logged(cmd: list[str], log_path: Path, *, env: dict | None = None, cwd: Path | None = None,
               rss: TreeRSS | None = None, timeout: float = 3600) -> subprocess.Popen:
    """Start a subprocess with its output in ``log_path``; returns it (call ``finish``)."""
    out = open(log_path, "ab")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
    p._bench_log = (out, log_path, time.monotonic() + timeout)  # type: ignore[attr-defined]
    if rss is not None:
        rss.watch(p.pid)
    return p


def finish(p: subprocess.Popen, what: str) -> None:
    """Wait for a run_logged process; a non-zero exit raises with the tail of its log."""
    out, log_path, deadline = p._bench_log  # type: ignore[attr-defined]
    try:
        p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise RuntimeError(f"{what} timed out (log: {log_path})") from None
    finally:
        out.close()
    if p.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"{what} exited {p.returncode} (log: {log_path}):\n  " + "\n  ".join(tail))


# ---- results ------------------------------------------------------------------------------
def machine() -> dict:
    import platform

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def write_json(name: str, obj: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / name
    path.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    return path


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for j, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def python_env() -> dict[str, str]:
    """Environment for subprocesses that import the project (spark-submit)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    if not env.get("SPARK_HOME"):
        import pyspark

        env["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def work_dir() -> Path:
    """Scratch space for dumps, files and logs (outside the repo: the servers write here too)."""
    import tempfile

    d = Path(tempfile.gettempdir()) / "shardflow-bench"
    d.mkdir(mode=0o777, exist_ok=True)
    os.chmod(d, 0o777)
    return d
