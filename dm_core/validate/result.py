"""What a validation run found, in the shapes users read it in: JSON (XCom, the Variable
``shardflow_<task>_validation``, the state store, the Migrations page), text (task log,
``dmctl validate``) and DM's ``validation status`` response.

Per target table: rows compared on each side, checksum queries, key chunks compared, the rows that
differ (kind + key + the values of each side), the rows a task filter explains (counted,
not reported), the rows that could not be confirmed before ``row-error-delay`` (pending),
and the time taken.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from dm_core.full.reconnect import only_servers_away

SHOWN = 20           # differing rows named per table and kind in text output


@dataclass
class RowDiff:
    kind: str                    # missing | extra | changed
    key: dict                    # downstream key column → value (text)
    upstream: dict | None = None     # the row's compared values upstream (None: no row)
    downstream: dict | None = None
    origin: str = ""             # upstream shard "source:schema.table" ('' for extra rows)
    reason: str = ""             # pending rows: why it could not be confirmed

    def key_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.key.items())


@dataclass
class TableResult:
    target: str
    shards: list[str] = field(default_factory=list)
    upstream_rows: int = 0
    downstream_rows: int = 0
    chunks: int = 0              # checksum queries of the first pass (every side's chunks; rows read: readers)
    buckets: int = 0             # key chunks compared (rows read: key-hash buckets)
    differing_buckets: int = 0   # of those, differing (while sync runs: still after the re-check)
    upstream_checksum: str = ""
    downstream_checksum: str = ""
    differences: list[RowDiff] = field(default_factory=list)
    more_differences: int = 0    # differing rows beyond max-pending-row-count (not named)
    filtered: int = 0            # differences a task filter explains
    resolved: int = 0            # candidates that a re-check after catch-up found equal
    pending: list[RowDiff] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    fallback: str | None = None  # why this table's rows were read and compared in Python (None: server checksums)
    server_away: bool = False    # ``error`` only says a server stayed away: a later run can compare it

    @property
    def equal(self) -> bool:
        return not self.differences and not self.more_differences and not self.pending and not self.error

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.differences or self.more_differences:
            return "different"
        return "pending" if self.pending else "equal"

    def differing_rows(self) -> int:
        return len(self.differences) + self.more_differences

    @property
    def missing(self) -> list[RowDiff]:
        return [d for d in self.differences if d.kind == "missing"]

    @property
    def extra(self) -> list[RowDiff]:
        return [d for d in self.differences if d.kind == "extra"]


@dataclass
class ValidationResult:
    task: str
    run_id: str = ""
    mode: str = "full"
    engine: str = "spark"        # spark | in-process
    started_at: str = ""
    finished_at: str | None = None
    checkpoints: dict = field(default_factory=dict)   # source → checkpoint when the run started
    tables: list[TableResult] = field(default_factory=list)
    error: str | None = None
    server_away: bool = False    # ``error`` only says a server stayed away

    @property
    def servers_away(self) -> bool:
        """It failed, and only because servers stayed away: the same run later can succeed."""
        return only_servers_away(self, *self.tables)

    @property
    def status(self) -> str:
        if self.finished_at is None:
            return "running"
        if self.error:
            return "error"
        kinds = {t.status for t in self.tables}
        for s in ("error", "different", "pending"):
            if s in kinds:
                return s
        return "equal"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status
        for t, td in zip(self.tables, d["tables"]):
            td["status"] = t.status
        d["summary"] = summary_line(self)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)


def from_dict(d: dict) -> ValidationResult:
    tables = []
    for t in d.get("tables", []):
        t = {k: v for k, v in t.items() if k != "status"}
        t["differences"] = [RowDiff(**r) for r in t.get("differences", [])]
        t["pending"] = [RowDiff(**r) for r in t.get("pending", [])]
        tables.append(TableResult(**t))
    keep = {k: v for k, v in d.items() if k in ValidationResult.__dataclass_fields__ and k != "tables"}
    return ValidationResult(tables=tables, **keep)


def summary_line(r: ValidationResult) -> str:
    rows = sum(t.upstream_rows for t in r.tables)
    diff = sum(t.differing_rows() for t in r.tables)
    pend = sum(len(t.pending) for t in r.tables)
    head = f"task {r.task}: {r.status.upper()}"
    # the DAG's job is run again by Airflow's retry policy (plugins/shardflow_airflow/retry.py)
    again = ("; a server stayed away: Airflow runs this validation again with backoff, comparing every table "
             "once it is back (`dmctl resume-task` runs it now)" if r.engine == "spark" and r.servers_away else "")
    if r.error:
        return f"{head}: {r.error}{again}"
    return (f"{head}: {len(r.tables)} table(s), {rows} upstream rows compared, {diff} differing row(s)"
            + (f", {pend} pending" if pend else "") + again)


def render(r: ValidationResult) -> str:
    """Plain text for task logs and dmctl."""
    lines = [f"{'target table':<32} {'upstream rows':>13} {'downstream rows':>15} {'queries':>7} {'chunks':>9} "
             f"{'differ':>6} {'filtered':>8} {'seconds':>7}  result"]
    for t in r.tables:
        lines.append(f"{t.target:<32} {t.upstream_rows:>13} {t.downstream_rows:>15} {t.chunks:>7} "
                     f"{t.differing_buckets:>4}/{t.buckets:<4} {t.differing_rows():>6} {t.filtered:>8} "
                     f"{t.seconds:>7.1f}  {t.status.upper()}")
        if t.error:
            lines.append(f"    error: {t.error}")
        if t.fallback:
            lines.append(f"    rows read and compared in Python, not checksummed by the servers: {t.fallback}")
        for kind, label in (("missing", "missing downstream"), ("extra", "extra downstream"), ("changed", "changed")):
            rows = [d for d in t.differences if d.kind == kind]
            for d in rows[:SHOWN]:
                vals = d.upstream if kind != "extra" else d.downstream
                more = f" (downstream: {d.downstream})" if kind == "changed" else ""
                lines.append(f"    {label}: {d.key_text()}  {vals}{more}")
            if len(rows) > SHOWN:
                lines.append(f"    ... {len(rows) - SHOWN} more {label}")
        if t.more_differences:
            lines.append(f"    ... and {t.more_differences} more differing rows (over max-pending-row-count)")
        for d in t.pending[:SHOWN]:
            lines.append(f"    pending ({d.kind}): {d.key_text()}: {d.reason}")
    lines.append(summary_line(r))
    return "\n".join(lines)


def dm_status(r: ValidationResult | None, task: str, sources: list[str]) -> dict:
    """DM's ``validation status`` response shape (validators per source, tableStatuses per
    table), with the whole shardflow result under ``validation``."""
    if r is None:
        return {"result": True, "msg": f"task {task}: no validation has run yet", "validators": [],
                "tableStatuses": []}
    stage = "Running" if r.status == "running" else "Stopped"
    differing = sum(t.differing_rows() for t in r.tables)
    pending = sum(len(t.pending) for t in r.tables)
    validators = [{
        "task": task, "source": sid, "mode": r.mode, "stage": stage,
        "validatorBinlog": r.checkpoints.get(sid) or "",
        "result": None if r.status in ("equal", "running") else {"isCanceled": False, "errors": [r.error or summary_line(r)]},
        "processedRowsStatus": f"compared rows: {sum(t.upstream_rows for t in r.tables if _has_source(t, sid))}",
        "pendingRowsStatus": f"pending rows: {pending}",
        "errorRowsStatus": f"differing rows: {differing}",
    } for sid in sources]
    tables = [{"source": s.split(":", 1)[0], "srcTable": s.split(":", 1)[1], "dstTable": t.target,
               "stage": stage, "message": t.error or t.status} for t in r.tables for s in t.shards]
    return {"result": True, "msg": "", "validators": validators, "tableStatuses": tables, "validation": r.to_dict()}


# DM's validation error types (dm/syncer/validator_checkpoint.go), by kind of differing row
_ERROR_TYPE = {"missing": "Expected rows not exist", "changed": "Column data not matched", "extra": "Deleted rows exist"}


def dm_errors(r: ValidationResult | None, state: str = "unprocessed") -> dict:
    """DM's ``validation show-error`` response shape: the differing rows of result ``r``, each a
    new (unprocessed) error; ``state`` ignored lists none (nothing is ever ignored here)."""
    if r is None or state == "ignored":
        return {"result": True, "msg": "" if r else "no validation has run yet", "error": []}
    errors = []
    for t in r.tables:
        for n, d in enumerate(t.differences, 1):
            source, _, src_table = d.origin.partition(":")
            errors.append({
                "id": f"{t.target}#{n}", "source": source, "srcTable": src_table,
                "srcData": json.dumps(d.upstream, default=str) if d.upstream is not None else "",
                "dstTable": t.target,
                "dstData": json.dumps(d.downstream, default=str) if d.downstream is not None else "",
                "errorType": _ERROR_TYPE.get(d.kind, d.kind), "status": "NewErr",
                "time": r.finished_at or r.started_at or "", "message": f"{d.kind}: {d.key_text()}"})
    return {"result": True, "msg": "", "error": errors}


def _has_source(t: TableResult, sid: str) -> bool:
    return any(s.split(":", 1)[0] == sid for s in t.shards)
