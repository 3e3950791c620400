"""DDL while the full phase runs, end to end on real servers and a real Spark load: a DDL
between the low watermark and the targets' creation (the target is created with it), then
ADD COLUMN, MODIFY (widening, with values only the new definition holds), ADD INDEX and
DROP COLUMN landing between chunks of the running load, with rows written all along; then
sync from the low watermark. Pessimistic and optimistic shard mode (a merged group over two
sources plus a table of its own) and no shard mode (tables of their own). The user's checks:
downstream schema as upstream (the merged table's columns; the own table's SHOW CREATE
TABLE) and rows equal to the union of the shards."""

import subprocess
import time

import psycopg2
import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, master_position, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA

from .helpers import register, shard_task_yaml
from .shard_helpers import assert_settled, assert_union, columns, drive, make_tables, run
from .test_full_support import job_lines, spark_env, submit_cmd
from .test_sync_ddl_coverage import show_create

pytestmark = pytest.mark.integration

ROWS = 600      # per table; chunks of 50: 12 chunks per table
EXTRA = ", b varchar(10) NULL DEFAULT 'b', c int NULL DEFAULT 7"


def _chunks_done(dsn, task) -> int:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.full_chunk WHERE task = %s", (task,))
        return int(cur.fetchone()[0])


def _on_all(tables, *templates):
    """Run each template (``{t}`` = the table) on every table, table after table."""
    for ep, q in tables:
        run(ep, *[tpl.format(t=q) for tpl in templates])


# The DDLs, in order, each with the rows written right after it. The load is running from
# the second one on; each waits for more chunks to be done than the one before.
STEPS = [
    (0, ["ALTER TABLE {t} ADD COLUMN early varchar(8) NOT NULL DEFAULT 'e'",
         "UPDATE {t} SET early = 'E1', amount = amount + 1 WHERE id % 9 = 0",
         "INSERT INTO {t} (name, amount, early) VALUES ('after-early', 1, 'E2')"]),
    (3, ["ALTER TABLE {t} ADD COLUMN note varchar(20) DEFAULT 'n' AFTER name",
         "UPDATE {t} SET note = CONCAT('note-', id) WHERE id % 7 = 0",
         "INSERT INTO {t} (name, amount, note) VALUES ('after-note', 2, 'N')"]),
    (9, ["ALTER TABLE {t} MODIFY b varchar(40) NULL DEFAULT 'b'",
         "UPDATE {t} SET b = CONCAT('a value longer than ten ', id) WHERE id % 5 = 0"]),
    (15, ["ALTER TABLE {t} ADD INDEX i_note (note)",
          "DELETE FROM {t} WHERE id % 11 = 0"]),
    (21, ["ALTER TABLE {t} DROP COLUMN c",
          "UPDATE {t} SET amount = amount + 100 WHERE id % 13 = 0",
          "INSERT INTO {t} (name, amount, note, b) VALUES ('after-drop', 3, 'N3', 'a long value written last')"]),
]


@pytest.mark.parametrize("mode", ["pessimistic", "optimistic", ""])
def test_ddl_during_the_full_load_converges(stack, uniq, mode, tmp_path):
    prefix, tdb, name = f"fd{uniq}", f"tfd{uniq}", f"fd{uniq}"
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    # sharded: t_1 on both sources merges into `t`, `solo` is a table of its own; no shard
    # mode: one source, so `t` has one member (a DDL on two members would run twice)
    specs = [(f"a-{uniq}", up1, f"{prefix}_1")] + ([(f"b-{uniq}", up2, f"{prefix}_2")] if mode else [])
    for sid, ep, schema in specs:
        make_tables(ep, schema, ["t_1"] + (["solo"] if ep is up1 else []), ROWS, EXTRA)
    text = shard_task_yaml(name, down, [(sid, i + 1) for i, (sid, _, _) in enumerate(specs)], prefix, tdb,
                           shard_mode=mode, do_dbs={sid: [schema] for sid, _, schema in specs})
    task = parse_task(text, "fd.yaml")
    (tmp_path / "fd.yaml").write_text(text)
    store = StateStore()
    register(store, {sid: ep for sid, ep, _ in specs}, name, text)
    tables = [(ep, qt(schema, "t_1")) for _, ep, schema in specs] + [(up1, qt(specs[0][2], "solo"))]
    proc = None
    try:
        # the low watermark first, then a DDL, then the targets: they are created with it
        for sid, ep, _ in specs:
            conn = connect(ep)
            f, p, g = master_position(conn)
            conn.close()
            store.update_source_state(name, sid, low_file=f, low_pos=p, low_gtid=g, stage="full")
        _on_all(tables, *STEPS[0][1])
        prepare(task, store)
        assert "early" in [c for c, _ in columns(down, tdb, "t")], "the target is created after the first DDL"

        proc = subprocess.Popen(submit_cmd(name, "--chunk-rows", "50"), start_new_session=True,
                                env=spark_env({"SHARDFLOW_FAULTS": "full.before_chunk_merge=sleep:0.3"}),
                                stdout=open(tmp_path / "load.out", "w"), stderr=open(tmp_path / "load.err", "w"))
        total = 12 * len(tables)
        mid_load = []
        for at, stmts in STEPS[1:]:
            deadline = time.monotonic() + 300
            while proc.poll() is None and _chunks_done(stack["state_dsn"], name) < at:
                assert time.monotonic() < deadline, "no load progress within 300 s"
                time.sleep(0.1)
            mid_load.append(_chunks_done(stack["state_dsn"], name) < total and proc.poll() is None)
            _on_all(tables, *stmts)
        rc = proc.wait(timeout=600)
        assert rc == 0, job_lines(tmp_path / "load.err")
        assert mid_load[:2] == [True, True], f"the DDLs must land while chunks are still to load: {mid_load}"
        finish(task, store)
        run(up1, f"INSERT INTO {tables[0][1]} (name, amount) VALUES ('after-high', 5)")

        last = drive(task, store, [sid for sid, _, _ in specs], max_rounds=80)
        assert_settled(last)
        assert_union(task, store)
        up_cols = [c for c in columns(up1, specs[0][2], "t_1") if c[0] != "id"]
        assert [c for c in columns(down, tdb, "t") if c[0] != "id"] == up_cols
        assert show_create(down, tdb, "solo") == show_create(up1, specs[0][2], "solo")
        for _, ep, schema in specs[1:]:  # every shard ended where the first did
            assert [c for c in columns(ep, schema, "t_1") if c[0] != "id"] == up_cols
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        reset_task(store, name)
        store.close()
        for _, ep, schema in specs:
            run(ep, f"DROP DATABASE IF EXISTS {qi(schema)}")
        run(down, f"DROP DATABASE IF EXISTS {qi(tdb)}")
