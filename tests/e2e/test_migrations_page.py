"""The Migrations page in a real browser (Debian's Chromium driven by Playwright) against
`airflow standalone`, on a sharded task that really runs (Spark full load, binlog sync):

- the sources are registered and the task added and started only through Airflow's REST API,
  as the trigger form does: the operations DAGs with Params, the sources' passwords in Airflow
  Connections; a task file with a password in the clear is refused, naming the field;
- pause and resume through shardflow_operate_task;
- log in through Airflow's own login form and open the page from Airflow's nav (/plugin/migrations);
- the task is there, synced, with both sources, their lag and recent windows;
- corrupt one downstream row and delete another: the *scheduled* validation (cron every
  minute, from the task file's validators block) names both keys -- in the state store, the
  Variable, `dmctl validation status` and on the page;
- `repair: true`: that run triggers dm_<task>_resync, which rewrites both rows while sync runs
  (both sources held, then resumed), and the validation after it is EQUAL;
- a shard DDL lock waiting for the second source shows who is waited for; its Unlock button
  triggers the unlock DAG, which releases it.

The screenshot in docs/ is taken here (`SHARDFLOW_DOCS_SCREENSHOT=1`).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from dm_core.db import connect, qt
from dm_core.validate.result import from_dict

from ..integration.helpers import drop_schemas, make_shards, shard_task_yaml
from ..integration.shard_helpers import run as _run
from .test_migration_through_airflow import _api, _wait_for, dmctl

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
# JPEG, quality 60: the README's picture stays small. Written into docs/ only when asked
# (SHARDFLOW_DOCS_SCREENSHOT=1): a plain test run leaves the checkout as it found it.
SHOT = ROOT / "docs" / "migrations-page.jpg" if os.environ.get("SHARDFLOW_DOCS_SCREENSHOT") == "1" else \
    Path(os.environ.get("SHARDFLOW_STACK_DIR", "/tmp")) / "migrations-page.jpg"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _task_file(tmp_path: Path, name: str, stack, sources: dict, prefix: str, tdb: str) -> Path:
    data = yaml.safe_load(shard_task_yaml(name, stack["down"], [(s, i + 1) for i, s in enumerate(sources)], prefix, tdb))
    data["target-database"]["password"] = "${SHARDFLOW_STACK_PASSWORD}"   # the Airflow workers' environment has it
    data["validators"] = {"every-minute": {"mode": "full", "schedule": "* * * * *", "row-error-delay": "3m",
                                           "check-interval": "2s", "repair": True}}
    for inst in data["mysql-instances"]:
        inst["continuous-validator-config-name"] = "every-minute"
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _run_dag(api, dag_id: str, conf: dict, timeout: float = 600) -> tuple[str, str]:
    """Trigger ``dag_id`` with ``conf`` (what the UI's trigger form posts) and wait for the run:
    (its state, its one task's log)."""
    run_id = api.trigger(dag_id, conf)["dag_run_id"]
    run = _wait_for(lambda: (r := api.run(dag_id, run_id)) and r["state"] in ("success", "failed") and r, timeout,
                    f"the {dag_id} run")
    from urllib.parse import quote

    tis = api.task_instances(dag_id, run_id)
    log = api._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                           f"{tis[0]['task_id']}/logs/{max(1, tis[0].get('try_number') or 1)}?full_content=true")
    return run["state"], json.dumps(log)


def _register_through_airflow(api, sources: dict) -> None:
    """Each source's password in an Airflow Connection, the source file without it, the
    register DAG run."""
    for sid, ep in sources.items():
        api._call("DELETE", f"/api/v2/connections/{sid}")
        api._call("POST", "/api/v2/connections", {"connection_id": sid, "conn_type": "mysql", "host": ep.host,
                                                   "port": ep.port, "login": ep.user, "password": ep.password})
        text = yaml.safe_dump({"source-id": sid, "enable-gtid": False, "from": {"host": ep.host, "port": ep.port}})
        state, log = _run_dag(api, "shardflow_register_source", {"source_yaml": text, "password_connection": sid})
        assert state == "success" and f"source {sid}: created ({ep.user}@{ep.host}:{ep.port})" in log, log[-3000:]
        assert ep.password not in log


class Browser:
    """One logged-in Chromium page on the Migrations page, inside Airflow's UI."""

    def __init__(self, pw, base: str, password: str):
        self.base = base
        # Playwright adds --headless and a fresh profile directory of its own
        self.browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS[1:])
        self.page = self.browser.new_page(viewport={"width": 1100, "height": 700})
        self.page.goto(f"{base}/plugin/migrations", timeout=180_000)
        self.page.fill("input[name=username]", "admin", timeout=180_000)
        self.page.fill("input[name=password]", password)
        self.page.click("button:has-text('Sign in')")
        self.page.wait_for_url(re.compile(".*/plugin/migrations.*"), timeout=180_000)

    def frame(self):
        """The page's own document: the iframe Airflow's UI embeds for the external view."""
        el = self.page.wait_for_selector("iframe[src*='shardflow']", timeout=120_000)
        f = el.content_frame()
        f.wait_for_load_state(timeout=120_000)
        return f

    def section(self, task: str, until, what: str, timeout: float = 300):
        """Reload until the task's section satisfies ``until(text)``; returns its text."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            f = self.frame()
            try:
                f.wait_for_selector(f"section[data-task='{task}']", timeout=60_000)
                text = f.inner_text(f"section[data-task='{task}']")
            except Exception:  # the page reloads itself every 15 s: try again
                text = ""
            if text and until(text):
                return text
            time.sleep(5)
            # the page inside Airflow's UI again (reloading the top URL Airflow rewrote does not
            # bring the iframe back)
            self.page.goto(f"{self.base}/plugin/migrations", timeout=120_000)
        pytest.fail(f"the Migrations page never showed {what}; last text:\n{text}")

    def close(self):
        self.browser.close()


def test_migrations_page_shows_the_task_and_the_scheduled_validation_names_damaged_keys(stack, airflow, uniq, tmp_path):
    from playwright.sync_api import sync_playwright

    prefix, tdb, name = f"mp{uniq}", f"mpt{uniq}", f"page{uniq}"
    schemas = [f"{prefix}_1", f"{prefix}_2"]
    make_shards(stack["up1"], schemas, ["t_1", "t_2"], rows=300)
    make_shards(stack["up2"], schemas[:1], ["t_1", "t_2"], rows=200)
    sources = {f"pa-{uniq}": stack["up1"], f"pb-{uniq}": stack["up2"]}
    e1, e2 = list(sources)
    task_file = _task_file(tmp_path, name, stack, sources, prefix, tdb)
    installed = ROOT / "config" / "tasks" / f"{name}.yaml"
    api = _api(stack)
    validate_dag = f"dm_{name}_validate"
    home = Path(stack["env"]["AIRFLOW_HOME"])
    password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    pw = sync_playwright().start()
    browser = None
    try:
        _register_through_airflow(api, sources)
        # a task file whose target password is readable in the run's conf is refused, naming the field
        clear = yaml.safe_load(task_file.read_text())
        clear["target-database"]["password"] = stack["down"].password
        state, log = _run_dag(api, "shardflow_add_task", {"task_yaml": yaml.safe_dump(clear), "start": True})
        assert state == "failed" and "target-database.password is in the clear" in log, log[-3000:]
        assert stack["down"].password not in log and not installed.exists()
        state, log = _run_dag(api, "shardflow_add_task", {"task_yaml": task_file.read_text(), "start": True,
                                                          "remove_meta": True})
        assert state == "success" and f"task {name}: started" in log, log[-3000:]
        api.set_paused(validate_dag, True)      # spare the CPU until there is something to validate

        browser = Browser(pw, stack["env"]["SHARDFLOW_AIRFLOW_URL"], password)
        text = browser.section(name, lambda t: "synced" in t and e1 in t and e2 in t and "phase: sync" in t,
                               "the task synced with both sources", timeout=900)
        # pause and resume from the operations DAG: the page's buttons trigger the same
        assert "Pause" in text and "Stop" in text
        from dm_core.state import StateStore

        for action, status in (("pause", "paused"), ("resume", "running")):
            state, log = _run_dag(api, "shardflow_operate_task", {"task": name, "action": action, "sources": []})
            assert state == "success", log[-3000:]
            with StateStore(stack["state_dsn"]) as store:
                assert store.task_info(name)["status"] == status
        browser.section(name, lambda t: "synced" in t and "Pause" in t, "the task synced again after resume")
        for sid in (e1, e2):
            row = browser.frame().inner_text(f"section[data-task='{name}'] tr[data-source='{sid}']")
            lag = browser.frame().inner_text(f"section[data-task='{name}'] tr[data-source='{sid}'] td.lag")
            assert "sync" in row and re.fullmatch(r"\d[\d,]*\.\d", lag.strip()), (row, lag)
        assert stack["down"].password not in text and stack["up1"].password not in browser.frame().content()

        # damage the downstream, then let the schedule run the validation
        conn = connect(stack["down"])
        with conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {qt(tdb, 't')} ORDER BY id")
            ids = [r[0] for r in cur.fetchall()]
            bad, gone = ids[17], ids[len(ids) // 2]
            cur.execute(f"UPDATE {qt(tdb, 't')} SET name = 'corrupted' WHERE id = %s", (bad,))
            cur.execute(f"DELETE FROM {qt(tdb, 't')} WHERE id = %s", (gone,))
        conn.close()
        damaged_at = time.time()
        api.set_paused(validate_dag, False)

        def publish_state(run_id: str):
            from urllib.parse import quote

            ti = api._call("GET", f"/api/v2/dags/{validate_dag}/dagRuns/{quote(run_id, safe='')}/taskInstances/publish")
            return (ti or {}).get("state")

        def scheduled_result():
            for run in api.runs(validate_dag, 5):
                if not run["dag_run_id"].startswith("scheduled__") or run.get("state") not in ("success", "failed"):
                    continue
                if publish_state(run["dag_run_id"]) not in ("success", "failed"):
                    continue    # e.g. its Spark task was killed: nothing was published
                from dm_core.state import StateStore

                with StateStore(stack["state_dsn"]) as store:
                    got = store.validation(name, run["dag_run_id"])
                if got and got.get("finished_at") and _ts(got["started_at"]) > damaged_at:
                    return run, from_dict(got)
            return None
        run, res = _wait_for(scheduled_result, 900, "a scheduled validation run after the damage")
        api.set_paused(validate_dag, True)
        t = res.tables[0]
        assert res.status == "different" and res.engine == "spark", res.to_dict()["summary"]
        assert sorted((d.kind, int(d.key["id"])) for d in t.differences) == sorted([("changed", bad), ("missing", gone)])
        assert publish_state(run["dag_run_id"]) == "failed", "a validation that found differences fails its publish task"
        variable = json.loads(api.variable(f"shardflow_{name}_validation"))
        assert variable["run_id"] == run["dag_run_id"] and variable["status"] == "different"
        status = json.loads(dmctl(stack, "validation", "status", name).stdout)
        assert status["validators"][0]["errorRowsStatus"] == "differing rows: 2"
        assert {s["source"] for s in status["validators"]} == {e1, e2}

        text = browser.section(name, lambda t: "DIFFERENT" in t and f"id={bad}" in t, "the validation result")
        assert f"id={gone}" in text and "changed" in text and "missing" in text
        assert browser.frame().query_selector(f"section[data-task='{name}'] button[data-dag='dm_{name}_resync']"), \
            "the page offers the re-sync of what the validation found"

        # repair: true -- that validation run triggered dm_<task>_resync, which rewrote both rows from the
        # shards while sync ran, then asked for a validation again: EQUAL
        resync_dag = f"dm_{name}_resync"
        rs = _wait_for(lambda: next((r for r in api.runs(resync_dag, 3) if r.get("state") in ("success", "failed")
                                     and r.get("conf", {}).get("validation_run") == run["dag_run_id"]), None),
                       600, "the re-sync run the validation triggered")
        assert rs["state"] == "success", rs
        repaired = json.loads(api.variable(f"shardflow_{name}_resync"))
        assert repaired["ok"] and [(x["target"], x["keys"], x["written"]) for x in repaired["tables"]] == \
            [(f"{tdb}.t", 2, 2)], repaired
        assert set(repaired["held"]) == {e1, e2}, repaired      # both sources held while rows were rewritten
        repaired_at = time.time()
        api.set_paused(validate_dag, False)

        def equal_after_repair():
            from dm_core.state import StateStore

            for r in api.runs(validate_dag, 5):
                with StateStore(stack["state_dsn"]) as store:
                    got = store.validation(name, r["dag_run_id"])
                if got and got.get("finished_at") and _ts(got["started_at"]) > repaired_at:
                    return from_dict(got)
            return None
        again = _wait_for(equal_after_repair, 600, "a validation run after the re-sync")
        api.set_paused(validate_dag, True)
        assert again.status == "equal", again.to_dict()["summary"]
        browser.section(name, lambda t: "EQUAL" in t, "the validation EQUAL after the re-sync")

        # a shard DDL lock the second source holds up: the page says who is waited for
        for s in schemas:
            for tb in ("t_1", "t_2"):
                _run(stack["up1"], f"ALTER TABLE {qt(s, tb)} ADD COLUMN late_col int NULL",
                     f"INSERT INTO {qt(s, tb)} (name, amount, late_col) VALUES ('stuck', 1, 1)")
        text = browser.section(name, lambda t: "late_col" in t and e2 in t.split("waiting for", 1)[-1],
                               "the lock waiting for the second source")
        waiting = browser.frame().inner_text(f"section[data-task='{name}'] tr.lock td.waiting")
        assert waiting.strip() == e2
        SHOT.parent.mkdir(exist_ok=True)
        browser.page.screenshot(path=str(SHOT), type="jpeg", quality=60)

        # its Unlock button triggers the unlock DAG, which releases the lock
        button = f"section[data-task='{name}'] button.danger[data-dag='dm_{name}_shard_ddl_unlock']"
        browser.frame().click(button)                       # asks for a second click
        assert "Click again" in browser.frame().inner_text(button)
        browser.frame().click(button)
        browser.frame().wait_for_selector("#msg .ok:has-text('triggered')", timeout=120_000)
        assert "triggered" in browser.frame().inner_text("#msg")
        unlock = _wait_for(lambda: next((r for r in api.runs(f"dm_{name}_shard_ddl_unlock", 3)
                                         if r.get("state") in ("success", "failed")), None), 300, "the unlock DAG run")
        assert unlock["state"] == "success"
        browser.section(name, lambda t: "late_col" not in t.split("Shard DDL locks", 1)[-1].split("Last validation")[0]
                        or "none" in t.split("Shard DDL locks", 1)[-1].split("Last validation")[0],
                        "the lock gone after the unlock", timeout=300)

        # its Stop button stops the task through shardflow_operate_task; then the page offers Start
        stop = f"section[data-task='{name}'] button[data-dag='shardflow_operate_task'][data-conf*='stop']"
        browser.frame().click(stop)
        browser.frame().click(stop)
        browser.frame().wait_for_selector("#msg .ok:has-text('shardflow_operate_task')", timeout=120_000)
        run = _wait_for(lambda: next((r for r in api.runs("shardflow_operate_task", 3)
                                      if r.get("conf", {}).get("action") == "stop" and r["conf"].get("task") == name
                                      and r.get("state") in ("success", "failed")), None), 300, "the stop run")
        assert run["state"] == "success"
        with StateStore(stack["state_dsn"]) as store:
            assert store.task_info(name)["status"] == "stopped"
        assert not api.active_runs(f"dm_{name}_incremental")
        browser.section(name, lambda t: "Start" in t and "phase: stopped" in t, "the task stopped, with Start")
    finally:
        if browser is not None:
            browser.close()
        pw.stop()
        try:
            api.set_paused(validate_dag, True)
        except Exception:
            pass
        dmctl(stack, "stop-task", name, check=False)     # if the test failed before its own stop
        installed.unlink(missing_ok=True)
        for sid in sources:
            api._call("DELETE", f"/api/v2/connections/{sid}")
        drop_schemas(stack["up1"], schemas)
        drop_schemas(stack["up2"], schemas)
        drop_schemas(stack["down"], [tdb])


def _ts(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso).timestamp()
