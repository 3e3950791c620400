"""The schema tracker without servers: DDL followed column by column (evolve), the TABLE_MAP
fit check, and versions by binlog position (a restart, a re-read and a rewind decode each row
with the schema of its own position)."""

import pytest

from dm_core.binlog import events as ev
from dm_core.schema_tracker import tracker as tr
from dm_core.schema_tracker.evolve import STALE, evolve
from dm_core.schema_tracker.table import TrackedColumn, TrackedTable

T0 = TrackedTable((TrackedColumn("id", "INT UNSIGNED"), TrackedColumn("name", "VARCHAR(20)", "latin1"),
                   TrackedColumn("e", "ENUM('x', 'y')", "latin1")), "latin1")


class View:
    def __init__(self, tables=None, schema_charset="utf8mb4"):
        self.t = dict(tables or {("d", "t"): T0})
        self.cs = schema_charset

    def get(self, s, n):
        return self.t.get((s, n))

    def tables_of(self, s):
        return [n for d, n in self.t if d == s]

    def charset_of(self, s):
        return self.cs


def cols(state):
    return None if state is None else state if state == STALE else \
        [(c.name, c.type, c.charset) for c in state.columns]


# statement, default schema, the table it lands on, its columns after (None: gone; STALE)
EVOLVE_CASES = [
    ("add-after", "ALTER TABLE t ADD COLUMN n BIGINT AFTER id", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("n", "BIGINT", None), ("name", "VARCHAR(20)", "latin1"),
      ("e", "ENUM('x', 'y')", "latin1")]),
    ("add-first-text-gets-table-charset", "alter table d.t add s text first", None, ("d", "t"),
     [("s", "TEXT", "latin1"), ("id", "INT UNSIGNED", None), ("name", "VARCHAR(20)", "latin1"),
      ("e", "ENUM('x', 'y')", "latin1")]),
    ("add-list", "ALTER TABLE t ADD COLUMN (a INT, b VARBINARY(4))", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("name", "VARCHAR(20)", "latin1"), ("e", "ENUM('x', 'y')", "latin1"),
      ("a", "INT", None), ("b", "VARBINARY(4)", "binary")]),
    ("drop", "ALTER TABLE t DROP COLUMN name", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("e", "ENUM('x', 'y')", "latin1")]),
    ("drop-if-exists-missing", "ALTER TABLE t DROP COLUMN IF EXISTS nope", "d", ("d", "t"), cols(T0)),
    ("modify-moves-and-resets-charset", "ALTER TABLE t MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 FIRST", "d",
     ("d", "t"), [("name", "VARCHAR(30)", "utf8mb4"), ("id", "INT UNSIGNED", None), ("e", "ENUM('x', 'y')", "latin1")]),
    ("change-renames", "ALTER TABLE t CHANGE e kind ENUM('x','y','z') NOT NULL", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("name", "VARCHAR(20)", "latin1"), ("kind", "ENUM('x', 'y', 'z')", "latin1")]),
    ("rename-column", "ALTER TABLE t RENAME COLUMN name TO title", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("title", "VARCHAR(20)", "latin1"), ("e", "ENUM('x', 'y')", "latin1")]),
    ("index-changes-nothing", "ALTER TABLE t ADD INDEX i (name), ALTER COLUMN id SET DEFAULT 1", "d", ("d", "t"),
     cols(T0)),
    ("convert-to", "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "d", ("d", "t"),
     [("id", "INT UNSIGNED", None), ("name", "VARCHAR(20)", "utf8mb4"), ("e", "ENUM('x', 'y')", "utf8mb4")]),
    ("create-with-schema-default", "CREATE TABLE n (a INT, b CHAR(3), c BLOB, g INT AS (a + 1) VIRTUAL)", "d",
     ("d", "n"), [("a", "INT", None), ("b", "CHAR(3)", "utf8mb4"), ("c", "BLOB", "binary"), ("g", "INT", None)]),
    ("create-with-own-charset", "CREATE TABLE n (b VARCHAR(3) COLLATE gbk_bin, c TEXT) DEFAULT CHARSET=latin1",
     "d", ("d", "n"), [("b", "VARCHAR(3)", "gbk"), ("c", "TEXT", "latin1")]),
    ("create-like", "CREATE TABLE _t_gho LIKE t", "d", ("d", "_t_gho"), cols(T0)),
    ("create-like-unknown", "CREATE TABLE x LIKE unknown", "d", ("d", "x"), STALE),
    ("create-select", "CREATE TABLE x SELECT * FROM t", "d", ("d", "x"), STALE),
    ("drop-table", "DROP TABLE IF EXISTS t", "d", ("d", "t"), None),
    ("alter-rename-to", "ALTER TABLE t RENAME TO u", "d", ("d", "u"), cols(T0)),
    ("unknown-clause", "ALTER TABLE t ADD SYSTEM VERSIONING", "d", ("d", "t"), STALE),
    ("missing-column", "ALTER TABLE t DROP COLUMN nope", "d", ("d", "t"), STALE),
]


@pytest.mark.parametrize("sql,schema,table,want", [c[1:] for c in EVOLVE_CASES], ids=[c[0] for c in EVOLVE_CASES])
def test_evolve(sql, schema, table, want):
    out = evolve(sql, schema, View())
    assert table in out, out
    assert cols(out[table]) == want


@pytest.mark.parametrize("sql", ["ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4", "alter table t force",
                                 "ALTER TABLE t ENGINE=InnoDB, ALGORITHM=COPY", "ALTER TABLE t ADD PARTITION (PARTITION p9)"])
def test_statements_that_change_no_column(sql):
    assert evolve(sql, "d", View()).get(("d", "t"), T0) == T0


def test_rename_tables_in_turn_as_the_server_does():
    """gh-ost's cut-over: the ghost table takes the original's name in one statement."""
    gho = TrackedTable(T0.columns + (TrackedColumn("n", "INT"),), "latin1")
    out = evolve("RENAME TABLE t TO _t_del, _t_gho TO t", "d", View({("d", "t"): T0, ("d", "_t_gho"): gho}))
    assert out[("d", "t")] == gho and out[("d", "_t_del")] == T0 and out[("d", "_t_gho")] is None


def test_drop_database_drops_its_tables_and_alter_of_unknown_tables_waits_for_a_read():
    v = View({("d", "t"): T0, ("d", "u"): T0, ("e", "t"): T0})
    assert evolve("DROP DATABASE d", None, v) == {("d", "t"): None, ("d", "u"): None}
    assert evolve("ALTER TABLE nope ADD c INT", "d", v) == {}
    assert evolve("GRANT ALL ON d.t TO u", None, v) == {}


def table_map(*types) -> ev.TableDef:
    return ev.TableDef("d", "t", [ev.ColumnDef(i, t, f"UNKNOWN_COL{i}", True) for i, t in enumerate(types)], False)


MISFIT_CASES = [
    ("fits", (ev.T_LONG, ev.T_VARCHAR, ev.T_ENUM), None),
    ("count", (ev.T_LONG, ev.T_VARCHAR), "has 2 columns, the tracked table 3"),
    ("type", (ev.T_LONGLONG, ev.T_VARCHAR, ev.T_ENUM), "column #1 `id` is INT UNSIGNED"),
]


@pytest.mark.parametrize("types,why", [c[1:] for c in MISFIT_CASES], ids=[c[0] for c in MISFIT_CASES])
def test_misfit_names_the_column(types, why):
    got = T0.misfit(table_map(*types))
    assert (got is None) if why is None else (why in got), got


class MemoryStore:
    """The state store's tracker table, in memory (the Postgres one is used by the integration tests)."""

    def __init__(self):
        self.rows = {}


@pytest.fixture
def memory(monkeypatch):
    mem = MemoryStore()

    def load(store, task, source):
        return [(s, t, k, f, d) for (ta, so, s, t, k), (f, d) in sorted(mem.rows.items()) if (ta, so) == (task, source)]

    def put(store, task, source, versions):
        for s, t, k, f, d in versions:
            mem.rows[(task, source, s, t, k)] = (f, d)
    monkeypatch.setattr(tr._store, "load", load)
    monkeypatch.setattr(tr._store, "put", put)
    return mem


def test_versions_by_position_survive_a_restart_and_a_reread(memory, monkeypatch):
    a = tr.SchemaTracker("task", "s1", store=None)
    a.set_table("d", "t", T0, (1, 100), "bin.000001")
    a.on_ddl("ALTER TABLE t RENAME COLUMN name TO title", "d", (1, 500), "bin.000001")
    a.on_ddl("ALTER TABLE t ADD COLUMN z INT", "d", (2, 40), "bin.000002")
    b = tr.SchemaTracker("task", "s1", store=None)     # a new process: read back from the store
    names = lambda key: [c.name for c in b.at("d", "t", key).columns]  # noqa: E731
    assert names((1, 499)) == ["id", "name", "e"]
    assert names((1, 500)) == names((1, 900)) == ["id", "title", "e"]
    assert names((3, 4)) == ["id", "title", "e", "z"]
    assert b.at("d", "t", (1, 99)) is tr._NONE
    before = dict(memory.rows)
    b.on_ddl("ALTER TABLE t RENAME COLUMN name TO title", "d", (1, 500), "bin.000001")   # read again: same
    assert memory.rows == before


def test_a_table_map_without_names_takes_the_tracked_names_and_a_misfit_pauses(memory):
    from dm_core.errors import ShardflowError

    t = tr.SchemaTracker("task", "s1", store=None)
    t.set_table("d", "t", T0, (1, 100), "bin.000001")
    assert t.for_rows(table_map(ev.T_LONG, ev.T_VARCHAR, ev.T_ENUM), (1, 200), "bin.000001") == T0
    with pytest.raises(ShardflowError) as e:
        t.for_rows(table_map(ev.T_LONG, ev.T_VARCHAR), (1, 200), "bin.000001")
    assert e.value.code.number == 50025 and "`d`.`t`" in e.value.message and "binlog-schema update" in str(e.value)
    named = table_map(ev.T_LONG, ev.T_VARCHAR, ev.T_ENUM)
    for c, n in zip(named.columns, ("id", "title", "e")):
        c.name = n
    with pytest.raises(ShardflowError, match="the binlog names the columns id, title, e"):
        t.check_names(named, (1, 200), "bin.000001")


def test_names_signedness_charsets_and_members_reach_the_decoder():
    from dm_core.binlog.codec import compile_table

    body = (b"\x01d\x00\x01t\x00\x03" + bytes([ev.T_LONG, ev.T_VARCHAR, ev.T_STRING])
            + b"\x04" + (20).to_bytes(2, "little") + bytes([ev.T_ENUM, 1]) + b"\x07")
    codec = compile_table(body, {}, mariadb=True, tracked=T0)
    row = (0xFFFFFFFF).to_bytes(4, "little") + b"\x02\xe9t" + b"\x02"
    (ch,) = codec.full_decoder(ev.WRITE_ROWS_V2, "insert")(b"\x00" + row, 0, 1 + len(row))
    assert ch.after == {"id": 4294967295, "name": "ét", "e": "y"}
