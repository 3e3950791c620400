"""The Migrations page's template on a made-up overview: what a user reads is there, text
from the servers (an error, a statement) is escaped, and the chart gets its points."""

from shardflow_airflow.ui.migrations_app import _env, sparkline

TASK = {
    "task": "shop", "status": "running", "task_mode": "all", "shard_mode": "pessimistic", "config_error": None,
    "phase": "sync", "synced": True, "runs": {"precheck": "success", "full": "success", "incremental": "running"},
    "sources": [
        {"source": "mysql-01", "stage": "sync", "checkpoint": "(mysql-bin.000003, 1234)", "lag_seconds": 0.4,
         "rows_per_second": 812.5, "applied_rows": 12000, "error": None, "error_statement": None},
        {"source": "mysql-02", "stage": "paused", "checkpoint": "(mysql-bin.000001, 99)", "lag_seconds": 31.0,
         "rows_per_second": 0.0, "applied_rows": 5, "error": "<script>alert(1)</script> DDL failed",
         "error_statement": "ALTER TABLE t ADD x int"},
        {"source": "mysql-03", "stage": "paused", "checkpoint": "(mysql-bin.000002, 7)", "lag_seconds": 240.0,
         "rows_per_second": 0.0, "applied_rows": 9, "error": "[code=50012:sync] source mysql-03 failed 9 times",
         "error_statement": None, "auto_resume_at": "2026-11-30 18:30:05 UTC"}],
    "windows": {"mysql-01": [{"rows": 100, "seconds": 2.0, "lag_seconds": 1.0},
                             {"rows": 300, "seconds": 2.0, "lag_seconds": 0.2}]},
    "locks": [{"lock_id": "shop-`db`.`t`", "target": "`db`.`t`", "status": "waiting", "ddls": ["ALTER TABLE t ADD x int"],
               "owner": "mysql-01", "reported": ["mysql-01"], "waiting_for": ["mysql-02"], "waiting_since": "2024-01-01T00:00:00"}],
    "validation": {"run_id": "scheduled__1", "status": "different", "mode": "full", "engine": "spark",
                   "started_at": "2024-01-01T00:00:00", "finished_at": "2024-01-01T00:01:00",
                   "summary": "task shop: DIFFERENT: 1 table(s), 10 upstream rows compared, 1 differing row(s)",
                   "tables": [{"target": "db.t", "status": "different", "upstream_rows": 10, "downstream_rows": 9,
                               "chunks": 3, "seconds": 1.0, "filtered": 0, "error": None, "more": 0, "pending": [],
                               "differences": [{"kind": "missing", "key": {"id": "42"}}]}]},
    "actions": [{"label": "Validate now", "dag_id": "dm_shop_validate", "conf": {}, "confirm": "sure?", "kind": "normal"}],
}


def test_page_shows_sources_lock_validation_and_escapes_server_text():
    html = _env().get_template("migrations.html").render(tasks=[TASK], user="admin", now="now")
    for text in ("mysql-01", "mysql-02", "(mysql-bin.000003, 1234)", "0.4", "phase: sync", "synced", "DIFFERENT",
                 "id=42", "Validate now", 'data-dag="dm_shop_validate"', "ALTER TABLE t ADD x int"):
        assert text in html, text
    assert '<td class="waiting"><b>mysql-02</b></td>' in html
    assert "it resumes by itself at 2026-11-30 18:30:05 UTC" in html   # the 50012 pause of mysql-03 only
    assert html.count("resumes by itself") == 1
    assert "paused: [code=50012:sync] source mysql-03" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<polyline") == 2


def test_sparkline_scales_points_into_the_box():
    assert sparkline([]) == "" and sparkline([None]) == ""
    pts = sparkline([0, 5, 10], width=100, height=20)
    assert pts == "0.0,19.0 50.0,10.0 100.0,1.0"
