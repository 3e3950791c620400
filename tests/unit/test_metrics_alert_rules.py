"""DM's alert rules (config/prometheus/dm_worker.rules.yml, as DM ships them) fire on shardflow's
series: ``promtool test rules`` evaluates them over input series made by the collector itself
(dm_core.metrics.collector.families) from state-store views, as Prometheus would scrape them
(job ``dm_master``, ``honor_labels: true``): a source paused on a permanent error fires DM's
sync-error and paused-task alerts, a shard DDL lock waiting for shards fires DM_pending_DDL, a
source three binlog files behind fires the master/syncer gap alert for that source alone (the
per-source ``instance`` keeps DM's ``on(instance, task, job)`` matches one-to-one)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from dm_core.metrics.collector import StateView, families

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "prometheus" / "dm_worker.rules.yml"
JOB, TARGET = "dm_master", "airflow:8080"   # the scrape job docs/operations.md sets up, and its target
STEP = "30s"


def source(task: str, sid: str, **kw) -> dict:
    """A source_state row as the syncer leaves it while caught up (overridden by ``kw``)."""
    row = dict(task=task, source_id=sid, stage="sync", requested="running", binlog_file="mysql-bin.000007",
               binlog_pos=4200, upstream_file="mysql-bin.000007", upstream_pos=4200, lag_seconds=0.0,
               remaining_seconds=0.0, applied_rows=100, applied_events=40, applied_inserts=60, applied_updates=30,
               applied_deletes=10, applied_ddls=0, lag_hist=None, txn_hist=None, ddl_hist=None, exits_paused=0,
               exits_retried=0, exits_load=0, worker="worker-1", high_file="mysql-bin.000001",
               low_file="mysql-bin.000001", shard_groups=None, updated=1.7e9)
    row.update(kw)
    return row


def scraped(view: StateView) -> dict[str, float]:
    """Series text → value, as Prometheus stores one scrape of /metrics."""
    out = {}
    for fam in families(view):
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if v != ""}   # Prometheus drops empty labels
            labels.setdefault("instance", TARGET)
            labels["job"] = JOB
            out[s.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"] = s.value
    return out


def series(timeline: list[tuple[StateView, int]]) -> list[dict]:
    """promtool input series: each view held for its number of steps, in order."""
    scrapes = [(scraped(v), n) for v, n in timeline]
    names = sorted({k for s, _ in scrapes for k in s})
    out = []
    for name in names:
        parts = []
        for s, n in scrapes:
            v = s.get(name)
            parts += ["_" if v is None else f"{v:g}"] * n
        out.append({"series": name, "values": _compress(parts)})
    return out


def _compress(values: list[str]) -> str:
    runs: list[list] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return " ".join(v if n == 1 else f"{v}x{n - 1}" for v, n in runs)


def rule(name: str) -> dict:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return next(r for g in groups for r in g["rules"] if r["alert"] == name)


def alert(name: str, value: float, **labels) -> dict:
    """What the rule's alert carries: the series' labels, the rule's, its annotations rendered."""
    r = rule(name)
    labels = {**labels, "job": JOB, **r["labels"]}

    def render(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
        return text.replace("{{ $value }}", f"{value:g}")

    return {"exp_labels": labels, "exp_annotations": {k: render(v) for k, v in r["annotations"].items()}}


def run_promtool(tmp_path, tests: list[dict]) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make setup` installs Debian's prometheus package, which has it"
    f = tmp_path / "dm_rules_test.yml"
    f.write_text(yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": STEP, "tests": tests},
                                sort_keys=False))
    r = subprocess.run([promtool, "test", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_source_paused_on_a_permanent_error_fires_dms_sync_error_and_paused_task_alerts(tmp_path):
    running = StateView(tasks={"shop": "running"}, sources=[source("shop", "mysql-01"), source("shop", "mysql-02")])
    paused = StateView(tasks={"shop": "running"}, sources=[
        source("shop", "mysql-01", stage="paused", exits_paused=1), source("shop", "mysql-02")])
    labels = {"instance": "mysql-01", "task": "shop", "source_id": "mysql-01"}
    run_promtool(tmp_path, [{
        "interval": STEP,
        "input_series": series([(running, 4), (paused, 60)]),   # paused from 2m on
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "DM_sync_process_exists_with_error", "exp_alerts": []},
            {"eval_time": "2m30s", "alertname": "DM_sync_process_exists_with_error",
             "exp_alerts": [alert("DM_sync_process_exists_with_error", 1, resumable_err="false", **labels)]},
            {"eval_time": "5m", "alertname": "DM_sync_process_exists_with_error", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "DM_task_state", "exp_alerts": []},   # paused, not 20 min yet
            {"eval_time": "23m", "alertname": "DM_task_state",
             "exp_alerts": [alert("DM_task_state", 3, worker="worker-1", **labels)]},
        ]}])


def test_a_shard_ddl_lock_waiting_for_shards_fires_dms_pending_ddl_alert(tmp_path):
    lock = {"lock_id": "shop-`db`.`t`", "mode": "pessimistic", "status": "waiting", "synced": ["mysql-01"],
            "unsynced": ["mysql-02"], "waiting_since": None}
    waiting = StateView(tasks={"shop": "running"}, sources=[source("shop", "mysql-01"), source("shop", "mysql-02")],
                        locks={"shop": [lock]})
    run_promtool(tmp_path, [{
        "interval": "1m",
        "input_series": series([(waiting, 80)]),
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "DM_pending_DDL", "exp_alerts": []},
            {"eval_time": "65m", "alertname": "DM_pending_DDL",
             "exp_alerts": [alert("DM_pending_DDL", 1, instance=TARGET, task="shop", type="Un-synced")]},
        ]}])


def test_a_source_files_behind_fires_the_master_syncer_gap_alert_for_it_alone(tmp_path):
    behind = StateView(tasks={"shop": "running"}, sources=[
        source("shop", "mysql-01", binlog_file="mysql-bin.000004", upstream_file="mysql-bin.000007"),
        source("shop", "mysql-02")])
    run_promtool(tmp_path, [{
        "interval": "1m",
        "input_series": series([(behind, 20)]),
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "DM_binlog_file_gap_between_master_syncer", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "DM_binlog_file_gap_between_master_syncer",
             # the subtraction on(instance, task, job) keeps those labels alone
             "exp_alerts": [alert("DM_binlog_file_gap_between_master_syncer", 3, instance="mysql-01", task="shop")]},
        ]}])
