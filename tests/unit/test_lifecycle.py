"""The lifecycle's pure rules (dm_core/state/lifecycle.py, dm_core/cli/status_view.py): what a
poke may do (gate), where a start resumes, what query-status says about each source, and the
task file parsed without credentials for commands that need none."""

import pytest

from dm_core.cli.status_view import describe
from dm_core.config.task import TaskConfigError, parse_task
from dm_core.state.lifecycle import Gate, gate, next_phase, parse_generation, resume_phase, resume_point

TASK = """\
name: t
task-mode: {mode}
target-database: {{host: 127.0.0.1, port: 4000, user: root, password: "${{SF_LIFECYCLE_UNSET_PW}}"}}
mysql-instances:
  - source-id: s1
  - source-id: s2
"""


def _task(mode="all"):
    return parse_task(TASK.format(mode=mode), "t.yaml", expand_env=False)


def info(status="running", generation=3):
    return {"name": "t", "status": status, "generation": generation, "config_text": ""}


def src(sid="s1", requested="running", stage="sync", error=None, **kw):
    row = {"source_id": sid, "requested": requested, "stage": stage, "error": error, "error_pos": None,
           "binlog_file": None, "binlog_pos": None, "low_file": None, "high_file": None, "lag_seconds": None}
    row.update(kw)
    return row


@pytest.mark.parametrize("task_info, source, generation, state", [
    (info(), src(), 3, "running"),
    (info(), src(), None, "running"),                       # a run triggered from the UI: the current start
    (info(), src(), 2, "stopped"),                          # a run of an earlier start ends
    (info("stopped"), src(), 3, "stopped"),
    (info("stopped"), src(requested="paused"), None, "stopped"),   # a stop beats a pause
    (info(), src(requested="stopped"), 3, "stopped"),       # stop-task -s
    (info(), src(requested="paused"), 3, "paused"),         # pause-task -s
    (info("paused"), src(), 3, "paused"),
    (info("paused"), None, 3, "paused"),                    # the task as a whole
    (info(), None, 2, "stopped"),
    (None, src(), None, "stopped"),                         # not registered
    (info(), src(stage="paused", error="boom"), 3, "running"),  # an error pause is the syncer's, not the gate's
])
def test_gate(task_info, source, generation, state):
    got = gate(task_info, source, generation)
    assert isinstance(got, Gate) and got.state == state
    assert (got.reason == "") == (state == "running")


def test_gate_names_the_newer_start():
    assert "#2" in gate(info(generation=5), src(), 2).reason and "#5" in gate(info(generation=5), src(), 2).reason


@pytest.mark.parametrize("value, want", [(None, None), ("", None), ("None", None), ("7", 7), (7, 7), (True, None)])
def test_parse_generation(value, want):
    assert parse_generation(value) == want


@pytest.mark.parametrize("mode, states, point, after_precheck", [
    ("all", [], "fresh", "full"),
    ("all", [src("s1", low_file="b.1")], "full", "full"),                          # stopped during the dump
    ("all", [src("s1", low_file="b.1", high_file="b.1")], "full", "full"),         # one source finished only
    ("all", [src("s1", high_file="b.1"), src("s2", high_file="b.2")], "incremental", "incremental"),
    ("all", [src("s1", high_file="b.1", binlog_file="b.3"), src("s2", high_file="b.2")], "incremental",
     "incremental"),
    ("incremental", [], "fresh", "incremental"),
    ("incremental", [src("s1", binlog_file="b.1")], "incremental", "incremental"),
    ("full", [src("s1", high_file="b.1"), src("s2", high_file="b.2")], "full", "full"),
])
def test_resume_point_and_next_phase(mode, states, point, after_precheck):
    t = _task(mode)
    assert resume_point(t, states) == point
    assert next_phase(t, states, "precheck") == after_precheck


@pytest.mark.parametrize("mode, states, phase", [
    ("all", [], "precheck"),                                                        # paused in the precheck
    ("all", [src("s1", low_file="b.1"), src("s2")], "full"),                        # paused in the load
    ("all", [src("s1", low_file="b.1", high_file="b.1"), src("s2", low_file="b.1")], "full"),
    ("all", [src("s1", high_file="b.1"), src("s2", high_file="b.2")], "incremental"),   # paused in finish
    ("full", [src("s1", high_file="b.1"), src("s2", high_file="b.2")], None),       # nothing follows
    ("full", [src("s1", low_file="b.1")], "full"),
    ("incremental", [], "incremental"),
])
def test_a_resumed_task_with_no_phase_running_goes_on_where_its_pause_ended_it(mode, states, phase):
    assert resume_phase(_task(mode), states) == phase


def test_full_hands_over_to_incremental_only_in_mode_all():
    assert next_phase(_task("all"), [], "full") == "incremental"
    assert next_phase(_task("full"), [], "full") is None


def test_commands_without_credentials_parse_without_the_environment(monkeypatch):
    monkeypatch.delenv("SF_LIFECYCLE_UNSET_PW", raising=False)
    t = _task()
    assert [i.source_id for i in t.mysql_instances] == ["s1", "s2"]
    with pytest.raises(TaskConfigError) as e:  # what connects still needs the variable, and says so
        parse_task(TASK.format(mode="all"), "t.yaml")
    assert "target-database.password" in str(e.value) and "SF_LIFECYCLE_UNSET_PW" in str(e.value)
    monkeypatch.setenv("SF_LIFECYCLE_UNSET_PW", "secret")
    assert parse_task(TASK.format(mode="all"), "t.yaml").target_database.password == "secret"


# ---- what query-status says ----------------------------------------------------------------
RUN = {"dag_run_id": "r2", "state": "running", "start_date": "2024-01-01T00:00:00Z", "conf": {"generation": 3}}


def view(phases=None, active=None, waiting=(), sensors=None):
    return {"phases": phases or {}, "active": active or {}, "waiting": list(waiting), "sensors": sensors or {},
            "sensor_run": "r2"}


@pytest.mark.parametrize("task_info, source, v, status, words", [
    (info("stopped"), src(binlog_file="b.1", binlog_pos=4), view(), "stopped", ["(b.1, 4) kept", "start-task"]),
    (info(), src(requested="stopped"), view(), "stopped", ["start-task -s s1"]),
    (info("stopped"), src(low_file="b.1"), view(), "stopped", ["full phase with 12 rows loaded", "only the rest"]),
    (info(), src(stage="paused", error="[code=50003:sync] downstream rejected X\nworkaround: y", error_pos="(b.1, 9)"),
     view(), "paused", ["downstream rejected X", "(b.1, 9)", "resume-task t -s s1"]),
    (info(), src(requested="paused"), view(), "paused", ["pause-task"]),
    (info(), src(stage="full", low_file="b.1", error="source s1 of task t: the full load read tables whose rows ...\n  at"),
     view(phases={"full": "failed"}), "not running", ["did not hand over", "finish task log"]),
    (info(), src(), view(waiting=["dm_t_incremental run r3 waits behind run r2"]), "waiting", ["behind run r2"]),
    (info(), src(), view(active={"precheck": [RUN]}), "waiting", ["precheck"]),
    (info(), src(), view(active={"full": [RUN]}), "waiting", ["full phase", "12 rows"]),
    (info(), src(), {**view(active={"full": [RUN]}), "full_retry": [
        {"task_id": "spark_load", "state": "up_for_retry", "try_number": 3}]}, "waiting",
     ["spark_load stopped because a server stayed away", "try 3", "12 rows", "resume-task t` runs it now",
      "stop-task t"]),
    (info(), src(), view(phases={"incremental": "success"}), "not running", ["no run", "start-task"]),
    (info(), src(), {**view(phases={"precheck": "failed"}), "failed": ["precheck"]}, "not running",
     ["precheck phase failed", "dm_t_precheck"]),
    (info(), src(), view(phases={"full": "failed"}), "not running", ["no run"]),  # failed: an earlier start's
    (info(), src(binlog_file="b.1", binlog_pos=4), view(active={"incremental": [RUN]},
                                                        sensors={"sync_s1": {"task_id": "sync_s1", "state": "running"}}),
     "running", ["syncing now"]),
    (info(), src(binlog_file="b.1", binlog_pos=4), {**view(active={"incremental": [RUN]}, sensors={
        "sync_s1": {"task_id": "sync_s1", "state": "running"}}), "held": set()}, "waiting", ["died"]),
    (info(), src(binlog_file="b.1", binlog_pos=4, lag_seconds=0.0),
     view(active={"incremental": [RUN]}, sensors={"sync_s1": {"task_id": "sync_s1", "state": "up_for_reschedule"}}),
     "running", ["synced up to (b.1, 4)"]),
    (info(), src(), view(active={"incremental": [RUN]},
                         sensors={"sync_s1": {"task_id": "sync_s1", "state": "up_for_retry", "try_number": 4}}),
     "waiting", ["try 4", "sync_s1"]),
    (info(), src(), view(active={"incremental": [RUN]}, sensors={"sync_s1": {"task_id": "sync_s1", "state": "queued"}}),
     "waiting", ["queued"]),
    (info(), src(), view(active={"incremental": [RUN]}, sensors={"sync_s1": {"task_id": "sync_s1", "state": "success"}}),
     "not running", ["start-task -s s1"]),
    (info(), src(), {"error": "cannot reach Airflow at http://x", "phases": {}, "waiting": []}, "running",
     ["cannot reach Airflow"]),
])
def test_describe(task_info, source, v, status, words):
    got_status, message = describe("t", task_info, source, v, loaded_rows=12)
    assert got_status == status, message
    for w in words:
        assert w in message, (w, message)


class _RunsOnly:
    """Answers what airflow_view asks, in the REST API's shapes (the real API is exercised in
    tests/e2e/test_lifecycle_through_airflow.py; this pins the rules on chosen run lists)."""

    def __init__(self, runs: dict, paused=(), down=()):
        self._runs, self._paused, self._down = runs, set(paused), list(down)

    def down_components(self):
        return self._down

    def runs(self, dag_id, limit):
        return self._runs.get(dag_id, [])

    def dag(self, dag_id):
        return {"dag_id": dag_id, "is_paused": dag_id in self._paused}

    def task_instances(self, dag_id, run_id):
        if dag_id.endswith("_full"):
            return [{"task_id": "prepare", "state": "success"}, {"task_id": "spark_load", "state": "up_for_retry"}]
        return [{"task_id": "sync_s1", "state": "running"}]


def _run(run_id, state, gen):
    return {"dag_run_id": run_id, "state": state, "start_date": "2024-01-01T00:00:00Z", "conf": {"generation": gen}}


def test_airflow_view_names_what_waits_behind_what_and_only_this_starts_failures():
    from dm_core.cli.status_view import airflow_view

    api = _RunsOnly({"dm_t_incremental": [_run("new", "queued", 5), _run("old", "running", 4)],
                     "dm_t_full": [_run("f1", "failed", 4)],
                     "dm_t_precheck": [_run("p2", "success", 5), _run("p1", "failed", 3)]})
    v = airflow_view(api, "t", 5)
    assert v["waiting"] == ["dm_t_incremental run new waits behind run old (running since 2024-01-01T00:00:00Z, "
                            "start #4 -- an earlier start, being ended; Airflow runs one at a time)"]
    assert v["failed"] == [], "the failed full run belongs to an earlier start"
    assert v["sensors"] == {"sync_s1": {"task_id": "sync_s1", "state": "running"}}
    assert describe("t", info(generation=5), src(), v)[0] == "waiting"
    v = airflow_view(_RunsOnly({"dm_t_precheck": [_run("p", "failed", 5)]}), "t", 5)
    assert v["failed"] == ["precheck"]
    v = airflow_view(_RunsOnly({"dm_t_full": [_run("f", "running", 5)]}), "t", 5)   # a step waits for its retry
    assert [ti["task_id"] for ti in v["full_retry"]] == ["spark_load"]
    assert describe("t", info(generation=5), src(), v)[1].startswith("the full phase's spark_load stopped")
    v = airflow_view(_RunsOnly({"dm_t_precheck": [_run("p", "queued", 5)]}, paused={"dm_t_precheck"}), "t", 5)
    assert "the DAG is paused in Airflow" in v["waiting"][0]


def test_resume_runs_a_step_waiting_for_its_retry_now_and_nothing_else():
    from dm_core.cli.lifecycle import retry_now

    class Api(_RunsOnly):
        def __init__(self, runs):
            super().__init__(runs)
            self.cleared = []

        def active_runs(self, dag_id):
            return [r for r in self.runs(dag_id, 10) if r["state"] in ("queued", "running")]

        def clear_tasks(self, dag_id, run_id, task_ids):
            self.cleared.append((dag_id, run_id, task_ids))

        def task_instances(self, dag_id, run_id):
            if dag_id.endswith("_validate"):
                return [{"task_id": "spark_validate", "state": "up_for_retry"}, {"task_id": "publish", "state": None}]
            if dag_id.endswith("_resync"):
                return [{"task_id": "spark_compare", "state": "success"}, {"task_id": "repair", "state": "up_for_retry"}]
            return super().task_instances(dag_id, run_id)

    api = Api({"dm_t_full": [_run("f", "running", 5)], "dm_t_incremental": [_run("i", "running", 5)]})
    assert retry_now(api, "t") == ["dm_t_full spark_load"]
    assert api.cleared == [("dm_t_full", "f", ["spark_load"])]   # not prepare (done), nor the sensors
    api = Api({"dm_t_full": [_run("f", "success", 5)]})
    assert retry_now(api, "t") == [] and api.cleared == []        # a full phase that ended waits for nothing
    # a validation's and a re-sync's step waiting for its retry; a validation run that ended is left alone
    api = Api({"dm_t_validate": [_run("v2", "running", 5), _run("v1", "failed", 5)],
               "dm_t_resync": [_run("r", "running", 5)], "dm_t_full": [_run("f", "running", 5)]})
    assert retry_now(api, "t", ("validate", "resync")) == ["dm_t_validate spark_validate", "dm_t_resync repair"]
    assert api.cleared == [("dm_t_validate", "v2", ["spark_validate"]), ("dm_t_resync", "r", ["repair"])]


def test_a_dead_airflow_component_is_named_with_the_restart():
    from dm_core.cli.status_view import airflow_view

    v = airflow_view(_RunsOnly({}, down=["scheduler (last heartbeat 2024-01-01T00:00:00Z)"]), "t", 5)
    status, message = describe("t", info(generation=5), src(), v)
    assert status == "running" and "Airflow's scheduler (last heartbeat" in message, message
    assert "make airflow-down && make airflow-up" in message and "docs/operations.md" in message
