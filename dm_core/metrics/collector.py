"""The metrics of every task and source, read from the state store when Prometheus scrapes.

``read_state(store)`` takes what the metrics need in one pass of short queries (plain data);
``families(state)`` turns it into metric families, a pure function tested without Postgres;
``StateCollector`` is the prometheus_client collector that does both per scrape, and
``exposition()`` the body and content type of a ``/metrics`` answer. The names, labels and
meanings are DM's where DM has the same thing (dm_core/metrics/__init__.py lists them).

Labels of a source's series: ``task``, ``source_id``, ``worker`` (the host whose syncer wrote
the source's last window) where DM has it, and ``instance``: the source id. DM runs one
DM-worker per source and its alert rules match a task's series ``on(instance, task, job)``;
shardflow serves all sources from one endpoint, so each source stands for its own instance
(Prometheus keeps it with ``honor_labels: true``, docs/operations.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.metrics import catalog
from dm_core.metrics.observe import HISTOGRAMS, file_index
from dm_core.state.schema import SCHEMA

# dm_worker_task_state: DM's stage numbers
INVALID, NEW, RUNNING, PAUSED, STOPPED, FINISHED = 0, 1, 2, 3, 4, 5

_SOURCE_COLUMNS = (
    "task", "source_id", "stage", "requested", "binlog_file", "binlog_pos", "upstream_file", "upstream_pos",
    "lag_seconds", "remaining_seconds", "applied_rows", "applied_events", "applied_inserts", "applied_updates",
    "applied_deletes", "applied_ddls", "lag_hist", "txn_hist", "ddl_hist", "exits_paused", "exits_retried",
    "exits_load", "worker", "high_file", "low_file", "shard_groups")


@dataclass
class StateView:
    """What the metrics read from the store at one scrape."""

    tasks: dict[str, str] = field(default_factory=dict)             # name → status
    sources: list[dict] = field(default_factory=list)               # source_state rows (_SOURCE_COLUMNS + updated)
    full: dict[tuple, dict] = field(default_factory=dict)           # (task, source) → chunk and table counts
    locks: dict[str, list[dict]] = field(default_factory=dict)      # task → its active shard DDL locks
    validations: dict[str, dict] = field(default_factory=dict)      # task → its newest finished run
    validating: set[str] = field(default_factory=set)               # tasks with a run in progress
    holds: dict[str, dict] = field(default_factory=dict)            # task → its re-sync hold


def _exists(cur, table: str) -> bool:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.{table}",))
    return bool(cur.fetchone()[0])


def read_state(store) -> StateView:
    """Everything the metrics show, from ``store`` (a StateStore); tables that parts of shardflow
    create when first used (plans, locks, re-sync holds) may not exist yet."""
    from dm_core.shardddl import coordinator

    v = StateView()
    with store.tx() as cur:
        cur.execute(f"SELECT name, status FROM {SCHEMA}.task")
        v.tasks = dict(cur.fetchall())
        cur.execute(f"SELECT {', '.join(_SOURCE_COLUMNS)}, extract(epoch FROM updated_at) FROM {SCHEMA}.source_state "
                    "ORDER BY task, source_id")
        v.sources = [dict(zip(_SOURCE_COLUMNS + ("updated",), r)) for r in cur.fetchall()]
        _read_full(cur, v)
        _read_validations(cur, v)
        if _exists(cur, "resync_hold"):
            cur.execute(f"SELECT task, broken, expires_at < now(), extract(epoch FROM now() - created_at) "
                        f"FROM {SCHEMA}.resync_hold")
            v.holds = {t: {"broken": b, "expired": e, "seconds": float(s)} for t, b, e, s in cur.fetchall()}
        lock_tasks = []
        if _exists(cur, "shardddl_lock"):
            cur.execute(f"SELECT DISTINCT task FROM {SCHEMA}.shardddl_lock")
            lock_tasks = sorted(r[0] for r in cur.fetchall())
    for t in lock_tasks:
        v.locks[t] = coordinator.list_locks(store, t, active_only=True)
    return v


def _read_full(cur, v: StateView) -> None:
    """Per (task, source): chunks and rows loaded, and, where plans exist, chunks and tables planned
    and tables whose every chunk is loaded."""
    cur.execute(f"SELECT task, source_id, count(*), coalesce(sum(rows), 0) FROM {SCHEMA}.full_chunk GROUP BY 1, 2")
    for t, s, n, rows in cur.fetchall():
        v.full[(t, s)] = {"chunks_done": int(n), "rows": int(rows)}
    if not _exists(cur, "full_plan"):
        return
    cur.execute(f"SELECT p.task, p.source_id, count(*), sum(p.chunks), count(*) FILTER (WHERE coalesce(c.n, 0) >= p.chunks) "
                f"FROM {SCHEMA}.full_plan p LEFT JOIN (SELECT task, source_id, schema_name, table_name, count(*) AS n "
                f"FROM {SCHEMA}.full_chunk GROUP BY 1, 2, 3, 4) c USING (task, source_id, schema_name, table_name) "
                "GROUP BY 1, 2")
    for t, s, tables, chunks, complete in cur.fetchall():
        v.full.setdefault((t, s), {"chunks_done": 0, "rows": 0}).update(
            tables_planned=int(tables), chunks_planned=int(chunks), tables_done=int(complete))


def _read_validations(cur, v: StateView) -> None:
    """The newest finished validation run of each task, with its differing and pending rows
    counted in the store (a result can list many rows), and the tasks with a run going on."""
    tables = "jsonb_array_elements(coalesce(result->'tables', '[]'::jsonb))"
    cur.execute(
        f"SELECT DISTINCT ON (task) task, status, extract(epoch FROM finished_at), "
        f"(SELECT coalesce(sum(jsonb_array_length(coalesce(t->'differences', '[]'::jsonb)) "
        f"+ coalesce((t->>'more_differences')::bigint, 0)), 0) FROM {tables} t), "
        f"(SELECT coalesce(sum(jsonb_array_length(coalesce(t->'pending', '[]'::jsonb))), 0) FROM {tables} t) "
        f"FROM {SCHEMA}.validation_run WHERE finished_at IS NOT NULL ORDER BY task, started_at DESC")
    v.validations = {t: {"status": s, "finished": float(f), "differing": int(d), "pending": int(p)}
                     for t, s, f, d, p in cur.fetchall()}
    cur.execute(f"SELECT DISTINCT task FROM {SCHEMA}.validation_run WHERE finished_at IS NULL "
                "AND started_at > now() - interval '1 day'")
    v.validating = {r[0] for r in cur.fetchall()}


def task_state(task_status: str | None, s: dict) -> int:
    """DM's dm_worker_task_state of a source: what the operator asked (task and source), then
    what the source does. A source paused on an error is Paused, as DM pauses the subtask."""
    stage, requested = s.get("stage") or "new", s.get("requested") or "running"
    if task_status is None:
        return INVALID
    if stage == "finished":
        return FINISHED
    if "stopped" in (task_status, requested, stage):
        return STOPPED
    if "paused" in (task_status, requested, stage) or stage == "error":
        return PAUSED
    return NEW if stage == "new" else RUNNING


def loader_progress(s: dict, full: dict | None) -> float | None:
    """DM's dm_loader_progress (0..1): chunks loaded over chunks planned during the full phase,
    1 once it handed over (high watermark) or finished; None for a source without a full phase."""
    if s.get("stage") == "finished" or (s.get("high_file") and s.get("low_file")):
        return 1.0
    if full and full.get("chunks_planned"):
        return min(1.0, full["chunks_done"] / full["chunks_planned"])
    return 0.0 if s.get("stage") == "full" else None


TASK_STATUSES = ("running", "paused", "stopped")
STAGES = ("new", "precheck", "full", "sync", "paused", "finished", "stopped")
VALIDATION_STATUSES = ("equal", "different", "pending", "error")


class _Out:
    """Metric families by name (catalog.METRICS), made when first given a sample."""

    def __init__(self):
        self.families: dict = {}

    def add(self, name: str, labels: dict, value) -> None:
        if value is None:
            return
        spec = catalog.BY_NAME[name]
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = _family(spec)
        values = [str(labels.get(k) or "") for k in spec.labels]
        if spec.kind == "histogram":
            fam.add_metric(values, buckets=value[0], sum_value=value[1])
        elif spec.kind == "untyped":
            fam.add_sample(name, dict(zip(spec.labels, values)), float(value))
        else:
            fam.add_metric(values, float(value))


def _family(spec):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

    if spec.kind == "untyped":   # exposed under DM's exact name (prometheus_client would add _total to a counter)
        return Metric(spec.name, spec.help, "unknown")
    cls = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily, "histogram": HistogramMetricFamily}[spec.kind]
    return cls(spec.name, spec.help, labels=list(spec.labels))


def histogram(name: str, column) -> tuple[list, float] | None:
    """Cumulative buckets and sum of a histogram column (observe.py's layout), or None."""
    from prometheus_client.utils import floatToGoString

    bounds = HISTOGRAMS[name][1]
    if not column or len(column) != len(bounds) + 2:
        return None
    out, total = [], 0.0
    for bound, n in zip(bounds, column[1:]):
        total += n
        out.append((floatToGoString(bound), total))
    out.append(("+Inf", total + column[-1]))
    return out, float(column[0])


def families(v: StateView) -> list:
    """The metric families of one scrape (catalog.METRICS) from what ``read_state`` read."""
    out = _Out()
    for name, status in sorted(v.tasks.items()):
        for st in TASK_STATUSES:
            out.add("shardflow_task_status", {"task": name, "status": st}, int(status == st))
    for s in v.sources:
        _source(out, v, s)
    for task, locks in sorted(v.locks.items()):
        _locks(out, v, task, locks)
    for task, r in sorted(v.validations.items()):
        for st in VALIDATION_STATUSES:
            out.add("shardflow_validation_status", {"task": task, "status": st}, int(r["status"] == st))
        out.add("shardflow_validation_differing_rows", {"task": task}, r["differing"])
        out.add("shardflow_validation_pending_rows", {"task": task}, r["pending"])
        out.add("shardflow_validation_finished_timestamp_seconds", {"task": task}, r["finished"])
    for task in sorted(set(v.validations) | v.validating):
        out.add("shardflow_validation_running", {"task": task}, int(task in v.validating))
    for task, h in sorted(v.holds.items()):
        holding = not h["broken"] and not h["expired"]
        out.add("shardflow_resync_holding", {"task": task}, int(holding))
        out.add("shardflow_resync_hold_seconds", {"task": task}, h["seconds"] if holding else 0.0)
    return list(out.families.values())


def _source(out: _Out, v: StateView, s: dict) -> None:
    task, sid = s["task"], s["source_id"]
    lab = {"task": task, "source_id": sid, "instance": sid, "worker": s["worker"]}
    out.add("dm_worker_task_state", lab, task_state(v.tasks.get(task), s))
    for stage in STAGES:
        out.add("shardflow_source_stage", {**lab, "stage": stage}, int(s["stage"] == stage))
    out.add("shardflow_source_updated_timestamp_seconds", lab, s["updated"])
    for node, f, p in (("master", s["upstream_file"], s["upstream_pos"]), ("syncer", s["binlog_file"], s["binlog_pos"])):
        if file_index(f) is not None:
            out.add("dm_syncer_binlog_file", {**lab, "node": node}, file_index(f))
            out.add("dm_syncer_binlog_pos", {**lab, "node": node}, p)
    if s["binlog_file"] or s["applied_events"]:   # the sync has started: its counters mean something
        out.add("dm_syncer_replication_lag_gauge", lab, s["lag_seconds"])
        out.add("dm_syncer_remaining_time", lab, s["remaining_seconds"])
        for kind in ("insert", "update", "delete", "ddl"):
            out.add("dm_syncer_finished_jobs", {**lab, "type": kind}, s[f"applied_{kind}s"])
        out.add("dm_syncer_finished_transaction", lab, s["applied_events"])
        out.add("shardflow_syncer_binlog_rows", lab, s["applied_rows"])
        for name, metric in (("lag", "dm_syncer_replication_lag"), ("txn", "dm_syncer_txn_duration_time"),
                             ("ddl", "dm_syncer_query_duration_time")):
            out.add(metric, lab, histogram(name, s[f"{name}_hist"]))
    for resumable, n in (("true", s["exits_retried"]), ("false", s["exits_paused"])):   # also before a checkpoint
        out.add("dm_syncer_exit_with_error_count", {**lab, "resumable_err": resumable}, n)
    _full(out, lab, s, v.full.get((task, sid)))
    locks = v.locks.get(task, ())
    out.add("dm_syncer_shard_lock_resolving", lab, int(any(
        lk["mode"] == "pessimistic" and lk["status"] != "idle" and sid in lk.get("synced", ()) for lk in locks)))
    if s["shard_groups"]:
        from dm_core.shardddl.coordinator import unresolved_groups

        for g in unresolved_groups(sid, s["shard_groups"], list(locks)):
            out.add("dm_syncer_unsynced_table_number", {**lab, "table": g["target"]}, len(g["unsynced"]))


def _full(out: _Out, lab: dict, s: dict, full: dict | None) -> None:
    out.add("dm_loader_progress", lab, loader_progress(s, full))
    if full is None and not s["exits_load"]:
        return
    full = full or {}
    for resumable, n in (("true", 0), ("false", s["exits_load"])):
        out.add("dm_loader_exit_with_error_count", {**lab, "resumable_err": resumable}, n)
    done, planned = full.get("chunks_done", 0), full.get("chunks_planned")
    out.add("shardflow_full_chunks", {**lab, "state": "loaded"}, done)
    out.add("shardflow_full_chunks", {**lab, "state": "planned"}, planned)
    out.add("shardflow_full_tables", {**lab, "state": "loaded"}, full.get("tables_done"))
    out.add("shardflow_full_tables", {**lab, "state": "planned"}, full.get("tables_planned"))
    out.add("shardflow_full_rows_loaded", lab, full.get("rows", 0))
    out.add("lightning_chunks", {**lab, "state": "finished"}, done)
    out.add("lightning_chunks", {**lab, "state": "estimated"}, planned)
    out.add("lightning_tables", {**lab, "state": "completed", "result": "success"}, full.get("tables_done"))
    out.add("lightning_tables", {**lab, "state": "pending", "result": "success"}, full.get("tables_planned"))


def _locks(out: _Out, v: StateView, task: str, locks: list[dict]) -> None:
    """DM-master's pending DDL count by state, and how long each active lock has waited."""
    import datetime as dt

    counts = {"Un-synced": 0, "Synced": 0}
    now = dt.datetime.now(dt.timezone.utc)
    for lk in locks:
        if lk["status"] in ("waiting", "conflict"):
            counts["Un-synced"] += 1
        elif lk["status"] == "ready":
            counts["Synced"] += 1
        since = lk.get("waiting_since")
        if since and lk["status"] != "idle":
            waited = (now - dt.datetime.fromisoformat(since)).total_seconds()
            out.add("shardflow_shard_ddl_lock_waiting_seconds",
                    {"task": task, "lock_id": lk["lock_id"], "mode": lk["mode"], "status": lk["status"]}, max(0.0, waited))
    for kind, n in counts.items():
        out.add("dm_master_ddl_state_number", {"task": task, "type": kind}, n)


class StateCollector:
    """A prometheus_client collector that reads the state store at every scrape (no values
    are kept in this process: the sensors that write them run anywhere)."""

    def __init__(self, open_store):
        self._open_store = open_store   # () -> a StateStore (a context manager)

    def collect(self):
        with self._open_store() as store:
            view = read_state(store)
        yield from families(view)


def exposition(open_store=None) -> tuple[bytes, str]:
    """The body and content type of a /metrics answer, read now: Prometheus' text format 0.0.4,
    which every Prometheus reads (DM's Go client serves it too)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

    if open_store is None:
        from dm_core.state.store import StateStore

        open_store = StateStore
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(open_store))
    return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4
