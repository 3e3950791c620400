"""DM's `downstream_more_column` case (pingcap/tiflow dm/tests/downstream_more_column/run.sh),
with DM's own task and source files (conf/, vendored unchanged; the incremental task file is
read as run.sh passes it) and its statements (data/*.sql, transcribed here):

- two upstream tables, `t1` and `t/;2` (a slash and a semicolon in its name, a newline in a
  column comment), route into one target the user created beforehand with one more column:
  an AUTO_INCREMENT primary key `a` that the upstream does not have (and no key on c1, whose
  values the two tables share);
- the full phase, then inserts through the binlog: every row lands once, `a` numbered
  downstream;
- stop-task, then start-task of the incremental task file with --remove-meta: the sync starts
  from the upstream's position now, and later inserts land. (DM's schema tracker then takes
  the downstream's four columns for the upstream table and the source pauses with "Column
  count doesn't match value count" until `operate-schema set`; shardflow reads the column
  names from the binlog, binlog_row_metadata=FULL, so there is nothing to repair.)
"""

import pytest
import yaml

from dm_core.config.task import load_task_file
from dm_core.reset import reset_task

from .harness import Sync, dm_case, dmctl, register_sources, run_sql, start

pytestmark = pytest.mark.integration

DB, DB1 = "downstream_more_column", "downstream_more_column1"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case("downstream_more_column", tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB1], "down": [DB]}) as got:
        yield got


def _c(down, where: str) -> list[tuple]:
    return sorted(tuple(r) for r in run_sql(down, f"SELECT c1, c2, c3 FROM {DB}.t WHERE {where}"))


def test_dm_downstream_more_column_case(case, stack, tmp_path):
    files, store = case
    up1, down = stack["up1"], stack["down"]
    comment = "comment '1;\n2'"
    run_sql(up1, f"create database `{DB1}`", f"use `{DB1}`",
            f"create table t1 (c1 int, c2 int, c3 int {comment}, primary key(c1))",
            "insert into t1 values(1, 1, 1)", "insert into t1 values(2, 2, 2)",
            f"create table `t/;2` (c1 int, c2 int, c3 int {comment}, primary key(c1))",
            "insert into `t/;2` values(1, 1, 1)")
    run_sql(down, f"create database `{DB}`", f"use `{DB}`",
            "create table t (a bigint PRIMARY KEY AUTO_INCREMENT, c1 int, c2 int, c3 int)")
    register_sources(files)
    task, sync = start(files, store)
    assert _c(down, "c1 < 100") == [(1, 1, 1), (1, 1, 1), (2, 2, 2)]

    run_sql(up1, f"use {DB1}", "insert into t1 values(111, 111, 111)", "insert into t1 values(222, 222, 222)",
            "insert into `t/;2` values(333, 333, 333)")
    sync.settle()
    assert _c(down, "c1 > 100 and c1 < 1000") == [(111, 111, 111), (222, 222, 222), (333, 333, 333)]
    assert run_sql(down, f"SELECT COUNT(DISTINCT a), COUNT(*) FROM {DB}.t") == [(6, 6)]

    # stop-task (what dmctl does in the state store; it also tells Airflow, which this test does not run),
    # then start-task dm-task-incremental.yaml --remove-meta
    store.stop_task(task.name)
    assert set(sync.step().values()) == {"stopped"}
    doc = yaml.safe_load((files.conf / "dm-task-incremental.yaml").read_text())
    doc["target-database"].update(yaml.safe_load(files.task_file.read_text())["target-database"])
    inc = tmp_path / "dm-task-incremental.yaml"
    inc.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out, err = dmctl("check-task", str(inc))
    assert rc == 0, out + err
    reset_task(store, task.name)
    store.start_task(task.name, inc.read_text())
    sync = Sync(load_task_file(str(inc)), store)
    sync.settle()
    run_sql(up1, f"use {DB1}", "insert into t1 values(1111, 1111, 1111)", "insert into t1 values(2222, 2222, 2222)")
    sync.settle()
    assert _c(down, "c1 > 1000 and c1 < 10000") == [(1111, 1111, 1111), (2222, 2222, 2222)]
    assert run_sql(down, f"SELECT COUNT(*) FROM {DB}.t") == [(8,)], "a row landed twice, or one was lost"
