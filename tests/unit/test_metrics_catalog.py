"""Every metric name DM's Standard Grafana dashboard and its alert rules read is either served
by /metrics or listed as not served with the reason, in dm_core.metrics.catalog and in
docs/operations.md alike; shardflow's own dashboard reads only served names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dm_core.metrics.catalog import METRICS, NOT_SERVED

ROOT = Path(__file__).resolve().parents[2]

# The metric names in DM-Monitor-Standard.json (pingcap/tiflow metrics/grafana/), panels and variables.
DM_STANDARD_DASHBOARD = {
    "dm_worker_task_state", "dm_syncer_remaining_time", "dm_syncer_replication_lag_bucket",
    "dm_syncer_finished_transaction_total", "dm_syncer_finished_jobs_total", "dm_syncer_txn_duration_time_bucket",
    "dm_syncer_query_duration_time_bucket", "dumpling_dump_finished_rows", "dumpling_dump_estimate_total_rows",
    "lightning_chunks", "lightning_tables", "lightning_row_read_bytes_sum", "lightning_block_deliver_bytes_sum",
    "go_goroutines",
}
PROMQL_WORDS = {"changes", "increase", "or", "on", "ON", "and", "group_right", "up"}


def served() -> set[str]:
    return {n for m in METRICS for n in m.series_names()}


def rule_metrics() -> set[str]:
    """Metric names in DM's alert rules' expressions (config/prometheus/dm_worker.rules.yml)."""
    import yaml

    groups = yaml.safe_load((ROOT / "config" / "prometheus" / "dm_worker.rules.yml").read_text())["groups"]
    names = set()
    for r in (r for g in groups for r in g["rules"]):
        names |= set(re.findall(r"\b([a-z_]+)(?=\{|\[|\s*(?:==|>|-|$))", r["expr"]))
    return names - PROMQL_WORDS


def test_dms_dashboard_and_rule_metrics_are_served_or_said_why_not():
    wanted = DM_STANDARD_DASHBOARD | rule_metrics()
    assert {"dm_syncer_exit_with_error_count", "dm_master_ddl_state_number", "dm_relay_space"} <= wanted
    unaccounted = sorted(n for n in wanted if n not in served() and n not in NOT_SERVED)
    assert not unaccounted, unaccounted
    assert not served() & set(NOT_SERVED), "a served name is also listed as not served"


def test_docs_list_every_metric_served_and_not_served():
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## Metrics"):]
    missing = [m.name for m in METRICS if f"`{m.series_names()[0] if m.kind == 'counter' else m.name}`" not in section]
    missing += [n for n in NOT_SERVED if f"`{n}`" not in section]
    assert not missing, f"docs/operations.md, Metrics, lacks: {missing}"


def test_shardflows_dashboard_reads_served_metrics_only():
    dash = json.loads((ROOT / "docs" / "grafana" / "shardflow.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"]]
    names = {n for e in exprs for n in re.findall(r"\b((?:dm|shardflow|lightning)_[a-z_]+)", e)}
    assert names and names <= served(), sorted(names - served())
