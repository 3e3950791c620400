"""DM's `initial_unit` case (pingcap/tiflow dm/tests/initial_unit/run.sh), with DM's own task and
source files (conf/, vendored unchanged: task-mode all, `chunk-filesize: 0`, `statement-size`,
`enable-relay: true`, warned and not acted on) and our own statements: `initial_unit`.`t<i>`
(TINYINT, INT UNIQUE; 200 rows), as DM's prepare_data.

DM makes its sync unit fail while it initializes, with error 1152 (aborted connection), at two
places in turn: loading its checkpoint (failpoint LoadCheckpointFailed) and asking the upstream
where its binlog ends (GetMasterStatusFailed). shardflow's fault points there are
``sync.load_checkpoint`` and ``upstream.master_status`` (dm_core/faults.py; action ``errno:1152``,
the server's error at every hit). What DM checks and what is checked here, per point:

1. the task starts (full phase done) and the source's first sync window fails: as any error
   that may go away (1152 is a lost connection), it is retried from the checkpoint 8 times, each
   said, then the source pauses with code 50012 naming the error and where it happened (DM
   pauses at once: Paused, "fail to initialize unit Sync"); nothing past the full phase applied;
2. resume-task while the error stays: paused again with the same error;
3. the error gone (DM restarts its worker without the failpoint), resume-task: the source syncs,
   query-status shows no error, the rows written meanwhile land once: downstream equals upstream.

Not ported: `start-task` of the running task refused ("already exist") needs Airflow's runs
(tests/e2e/test_lifecycle_through_airflow.py); relay.
"""

import json

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "initial_unit"
S1 = "mysql-replica-01"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def _status(name: str) -> dict:
    rc, out, err = dmctl("query-status", name)
    assert rc == 0, out + err
    return {s["source"]: s for s in json.loads(out)["tasks"][0]["sources"]}


def _until_paused(session, steps: int = 14) -> list[str]:
    said = []
    for _ in range(steps):
        out = session.step()
        said.append(out.state)
        if out.state == "paused":
            return said
    pytest.fail(f"never paused: {said}")


WHERE = {"sync.load_checkpoint": "cannot read its checkpoint and stage from the state store",
         "upstream.master_status": "cannot read the upstream's binlog position (SHOW MASTER STATUS): server error "
                                   "1152 (aborted connection)"}


@pytest.mark.parametrize("point", list(WHERE))
def test_dm_initial_unit_case(case, stack, monkeypatch, point):
    from dm_core.sync.session import TRANSIENT_RETRIES

    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t0 (i TINYINT, j INT UNIQUE KEY)",
            *[f"INSERT INTO {DB}.t0 VALUES ({j}, {j}000{j}), ({j}, {j}001{j})" for j in range(1, 101)])
    register_sources(files)
    task, sync = start_task(files.task_file, store, settle=False)
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.t0") == [(200,)]          # the full phase
    run_sql(up, f"INSERT INTO {DB}.t0 VALUES (101, 1010101)", f"UPDATE {DB}.t0 SET i = 7 WHERE j = 1000")

    # 1. the first sync window fails where DM's sync unit initializes: paused, naming the error
    monkeypatch.setenv("SHARDFLOW_FAULTS", f"{point}=errno:1152")
    said = _until_paused(sync.sessions[S1])
    assert said == ["retrying"] * TRANSIENT_RETRIES + ["paused"], said
    st = _status(task.name)[S1]
    assert st["status"] == "paused" and "[code=50012:sync]" in st["error"], st
    assert WHERE[point] in st["error"] and "1152" in st["error"], st
    assert "resume-task" in st["message"], st
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.t0") == [(200,)]

    # 2. resume while the error stays: paused again, the same error
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    assert _until_paused(sync.sessions[S1]) == ["retrying"] * TRANSIENT_RETRIES + ["paused"]
    assert WHERE[point] in _status(task.name)[S1]["error"]

    # 3. the error gone: resume, the rows written meanwhile land once
    monkeypatch.delenv("SHARDFLOW_FAULTS")
    rc, out, err = dmctl("resume-task", task.name)
    assert rc == 0, out + err
    states = sync.settle()
    assert set(states.values()) == {"caught_up"}, states
    st = _status(task.name)[S1]
    assert st["status"] == "running" and st["error"] is None, st
    assert table_rows(down, DB, "t0", ["i", "j"]) == table_rows(up, DB, "t0", ["i", "j"])
    assert len(table_rows(down, DB, "t0", ["i", "j"])) == 201
