"""Foreign key checks on downstream (`target-database.session: {foreign_key_checks: 1}`), as DM's
syncer has them: a child's conflict keys include its parent's, safe-mode INSERT/UPDATE run with the
checks off, a safe-mode UPDATE of a key is refused, and `compact` / `multiple-rows` are refused."""

import textwrap

import pytest

from dm_core.config.task import TaskConfigError, parse_task
from dm_core.errors import ShardflowError
from dm_core.sync.causality import Causality
from dm_core.sync.job import RowJob
from dm_core.sync.workers import WorkerPool
from dm_core.target import TargetTable

PARENT = TargetTable("db", "parent", ("parent_id", "info"), ("parent_id",), True)
CHILD = TargetTable("db", "child", ("child_id", "parent_id"), ("child_id",), True,
                    parents=((("parent_id",), ("db", "parent")),))


def test_a_child_shares_its_parents_conflict_key():
    p = RowJob("insert", PARENT, None, {"parent_id": 40, "info": "p"}, False)
    c = RowJob("insert", CHILD, None, {"child_id": 400, "parent_id": 40}, False)
    moved = RowJob("update", CHILD, {"child_id": 201, "parent_id": 20}, {"child_id": 201, "parent_id": 10}, False)
    assert p.keys()[0] in c.keys()
    assert ("db", "parent", (20,)) in moved.keys() and ("db", "parent", (10,)) in moved.keys()
    orphan = RowJob("insert", CHILD, None, {"child_id": 1, "parent_id": None}, False)
    assert orphan.keys() == (("db", "child", (1,)),)
    for n in range(2, 9):   # whatever the hash, parent and child land on one worker, in order
        causality = Causality(n)
        assert causality.add(p) == causality.add(c)


def _statements(jobs):
    pool = WorkerPool(lambda: None, 1, foreign_key_checks=True)
    return [s.sql for s in pool._merge(jobs)]


def test_safe_mode_inserts_and_updates_run_with_the_checks_off():
    replace = RowJob("insert", PARENT, None, {"parent_id": 1, "info": "a"}, True)
    update = RowJob("update", PARENT, {"parent_id": 1, "info": "a"}, {"parent_id": 1, "info": "b"}, True)
    delete = RowJob("delete", PARENT, {"parent_id": 1, "info": "b"}, None, True)
    plain = RowJob("insert", PARENT, None, {"parent_id": 2, "info": "c"}, False)
    got = _statements([replace, update, delete, plain])
    assert got[0] == "SET SESSION foreign_key_checks = 0" and got[1].startswith("REPLACE")
    assert got[2].startswith("DELETE") and got[3].startswith("REPLACE")     # the safe UPDATE
    assert got[4] == "SET SESSION foreign_key_checks = 1" and got[5].startswith("DELETE")   # cascades downstream
    assert got[6].startswith("INSERT") and len(got) == 7


def test_a_safe_mode_update_of_a_key_is_refused():
    move = RowJob("update", PARENT, {"parent_id": 1, "info": "a"}, {"parent_id": 9, "info": "a"}, True)
    with pytest.raises(ShardflowError, match="PK/UK changes is not supported"):
        _statements([move])
    assert _statements([RowJob("update", PARENT, {"parent_id": 1, "info": "a"}, {"parent_id": 9, "info": "a"},
                               False)])[1].startswith("UPDATE")


BASE = """\
name: fk
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: "pw", session: {foreign_key_checks: 1}}
mysql-instances:
  - source-id: mysql-01
    syncer-config-name: global
syncers:
  global: {worker-count: 4, %s: true}
"""


@pytest.mark.parametrize("option", ["compact", "multiple-rows"])
def test_options_that_merge_statements_are_refused(option):
    with pytest.raises(TaskConfigError) as e:
        parse_task(textwrap.dedent(BASE % option), "task.yaml")
    assert any(p.key == f"syncers.global.{option}" and "foreign_key_checks=1" in p.message for p in e.value.problems)
    assert parse_task(BASE.replace("foreign_key_checks: 1", "foreign_key_checks: 0") % option, "task.yaml")


UNSET = """\
name: fk
task-mode: all
target-database: {host: 127.0.0.1, port: 4000, user: root, password: "pw"%s}
mysql-instances:
  - source-id: mysql-01%s
  - source-id: mysql-02
    syncer-config-name: global
syncers:
  global: {worker-count: 4%s}
"""


@pytest.mark.parametrize("session, first, setting, want_first, want_global", [
    # unset: merged changes, multi-row statements (shardflow's defaults; DM's are off) ...
    ("", "", "", True, True),
    ("", "\n    syncer: {batch: 10}", "", True, True),
    # ... unless foreign key checks are on: DM's per-row statements, without an error
    (", session: {foreign_key_checks: 1}", "", "", False, False),
    (", session: {foreign_key_checks: 1}", "\n    syncer: {batch: 10}", "", False, False),
    # set: as set
    ("", "", ", multiple-rows: false", True, False),
    ("", "\n    syncer: {multiple-rows: false}", "", False, True),
    (", session: {foreign_key_checks: 0}", "", ", multiple-rows: true", True, True),
])
@pytest.mark.parametrize("option", ["compact", "multiple-rows"])
def test_merging_options_left_unset_are_on_unless_foreign_key_checks_are(session, first, setting, want_first,
                                                                         want_global, option):
    task = parse_task(UNSET % (session, first.replace("multiple-rows", option), setting.replace("multiple-rows", option)),
                      "task.yaml")
    attr = option.replace("-", "_")
    assert getattr(task.instance("mysql-01").syncer, attr) is want_first
    assert getattr(task.instance("mysql-02").syncer, attr) is want_global
    assert getattr(task.syncers["global"], attr) is want_global
