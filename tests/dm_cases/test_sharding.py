"""DM's `sharding` case (pingcap/tiflow dm/tests/sharding/run.sh), with DM's own task and source
files (conf/, vendored unchanged) and our own statements for the same situations:

1. two upstreams, each with a `sharding1` schema whose tables t1/t2 (upstream 1) and t2/t3
   (upstream 2) merge into `db_target`.`t_target` (DM's routes, no column mapping: the shards'
   AUTO_INCREMENT ranges keep ids apart); clients with different sql_modes (NO_ZERO_IN_DATE on one,
   ANSI_QUOTES on the other); full phase, then `sync diff`;
2. the shard DDL sequence of the case, interleaved with rows on every shard: ADD COLUMN, a JSON
   VIRTUAL generated column, an int generated column with a UNIQUE key over it, a multi-column
   index with the generated column, a DATETIME NOT NULL column defaulting to the zero date and
   rows with zero-ish dates, the UPDATE of a unique key; one source restarted three times in the
   middle (DM pauses it at three checkpoint failpoints and resumes it); then `sync diff`;
3. new shards joining in sharding mode: CREATE DATABASE `sharding2` and CREATE TABLE on both
   upstreams, rows in old and new shards; `sync diff` over sharding1 and sharding2;
4. DROP TABLE, TRUNCATE TABLE and DROP DATABASE of shards: ignored downstream in sharding mode, as
   in DM (the rows of dropped shards stay: the checksum of uid > 70000 is unchanged), while
   rows below 70000 equal the upstream union;
5. two different DDLs on two shards of one upstream: the source pauses with DM's "inconsistent
   DDL sequence" and a resume pauses it again.
"""

import pytest



from .harness import dm_case, dmctl, register_sources, run_sql, start, table_rows, union_rows

pytestmark = pytest.mark.integration

# DM's upstream 1 runs NO_ZERO_IN_DATE,NO_ZERO_DATE (MySQL, not strict); MariaDB refuses a zero
# DEFAULT under NO_ZERO_DATE even when not strict, so its client keeps NO_ZERO_IN_DATE only.
MODE1, MODE2 = "NO_ZERO_IN_DATE", "ANSI_QUOTES"
BASE = ["id", "uid", "name", "info"]
ALL = BASE + ["age", "info_json", "id_gen", "CAST(create_by AS CHAR)"]
SHARD_DDL = ("(id bigint AUTO_INCREMENT, uid int, name varchar(80), info varchar(100), age int, "
             "info_json json GENERATED ALWAYS AS (info) VIRTUAL, id_gen int GENERATED ALWAYS AS ((uid + 1)) VIRTUAL, "
             "create_by datetime NOT NULL DEFAULT '0000-00-00 00:00:00', PRIMARY KEY (id), UNIQUE KEY uid (uid), "
             "UNIQUE KEY id_gen (id_gen), KEY multi_col_idx (uid, id_gen)) AUTO_INCREMENT={}")


def _table(auto_increment: int) -> str:
    return ("(id bigint AUTO_INCREMENT, uid int, name varchar(80), info varchar(100), PRIMARY KEY (id), "
            f"UNIQUE KEY (uid)) AUTO_INCREMENT={auto_increment}")


def _shards(up1, up2, with2: bool):
    s = [(up1, "sharding1", "t1"), (up1, "sharding1", "t2"), (up2, "sharding1", "t2"), (up2, "sharding1", "t3")]
    if with2:
        s += [(up1, "sharding2", "t1"), (up1, "sharding2", "t2"), (up1, "sharding2", "t3"), (up2, "sharding2", "t4")]
    return s


@pytest.fixture
def case(stack, tmp_path):
    ups = ["sharding1", "sharding2"]
    with dm_case("sharding", tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": ups, "up2": ups, "down": ["db_target"]}) as got:
        yield got


def test_dm_sharding_case_up2_logs_no_column_names(case, stack):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]

    # 1. the shards, the sources, the task, the full phase
    run_sql(up1, "CREATE DATABASE sharding1", f"CREATE TABLE sharding1.t1 {_table(1)}",
            f"CREATE TABLE sharding1.t2 {_table(1000)}",
            "INSERT INTO sharding1.t1 (uid, name) VALUES (11001, 'Ana Lucía Pérez'), (11002, 'Mañana será otro día')",
            "INSERT INTO sharding1.t2 (uid, name) VALUES (21001, 'Ñandú'), (21002, 'Ölçü'), (21003, 'Über')",
            sql_mode=MODE1)
    run_sql(up2, "CREATE DATABASE sharding1", f"CREATE TABLE sharding1.t2 {_table(2000)}",
            f"CREATE TABLE sharding1.t3 {_table(3000)}",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (41000, 'Çarşı', '{}')",
            "INSERT INTO sharding1.t3 (uid, name, info) VALUES (31001, 'Łódź', '{}'), (31002, 'Dvořák', '{}'), "
            "(31003, 'Zürich', NULL)", sql_mode=MODE2)
    register_sources(files)
    task, sync = start(files, store)
    assert task.shard_mode == "pessimistic"  # DM's `is-sharding: true`
    shards = _shards(up1, up2, False)
    assert table_rows(down, "db_target", "t_target", BASE) == union_rows(shards, BASE)

    # 2. the shard DDL sequence, rows between, one source restarted three times mid-way
    run_sql(up1,
            "INSERT INTO sharding1.t1 (uid, name) VALUES (11003, 'Cartagena')",
            "UPDATE sharding1.t1 SET name = 'Ana Lucía Pérez de la Vega' WHERE uid = 11001",
            "UPDATE sharding1.t1 SET name = 'Tomorrow is another day' WHERE name = 'Mañana será otro día'",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (21013, 'Sargento', '{}')",
            "ALTER TABLE sharding1.t1 ADD COLUMN age int",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (21023, 'Pilar', '{}'), (21033, 'Ternera', '{}')",
            "ALTER TABLE sharding1.t2 ADD COLUMN age int",
            "INSERT INTO sharding1.t2 (uid, name, age, info) VALUES (21004, 'Coronel', 202, '{}')",
            "ALTER TABLE sharding1.t2 ADD COLUMN info_json json GENERATED ALWAYS AS (info) VIRTUAL",
            "INSERT INTO sharding1.t1 (uid, name, info) VALUES (11004, 'Macondo', '{\"age\": 7}')",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (21005, 'Macondo', '{\"age\": 70}'), "
            "(21006, 'Riohacha', '{\"age\": 700}')",
            "ALTER TABLE sharding1.t1 ADD COLUMN info_json json GENERATED ALWAYS AS (info) VIRTUAL",
            "ALTER TABLE sharding1.t1 ADD COLUMN id_gen int AS (uid + 1)",
            "ALTER TABLE sharding1.t2 ADD COLUMN id_gen int AS (uid + 1)",
            "ALTER TABLE sharding1.t1 ADD UNIQUE (id_gen)",
            "ALTER TABLE sharding1.t2 ADD UNIQUE (id_gen)",
            "INSERT INTO sharding1.t1 (uid, name, info) VALUES (11005, 'Aracataca', '{\"age\": 71}')",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (21007, 'Aracataca', '{\"age\": 72}')",
            "ALTER TABLE sharding1.t1 ADD KEY multi_col_idx (uid, id_gen)",
            "ALTER TABLE sharding1.t2 ADD KEY multi_col_idx (uid, id_gen)",
            "INSERT INTO sharding1.t1 (uid, name, info) VALUES (11006, 'Barranquilla', '{\"age\": 73}')",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (21008, 'Barranquilla', '{\"age\": 74}')",
            "ALTER TABLE sharding1.t2 ADD COLUMN create_by datetime NOT NULL DEFAULT '0000-00-00 00:00:00'",
            "INSERT INTO sharding1.t2 (uid, name, info, create_by) VALUES (101, 'now', '{\"age\": 1}', NOW())",
            "INSERT INTO sharding1.t2 (uid, name, info, create_by) VALUES (102, 'zero', '{\"age\": 2}', "
            "'0000-00-00 00:00:01')",
            "ALTER TABLE sharding1.t1 ADD COLUMN create_by datetime NOT NULL DEFAULT '0000-00-00 00:00:00'",
            "INSERT INTO sharding1.t1 (uid, name, info, create_by) VALUES (103, 'now', '{\"age\": 3}', NOW())",
            "INSERT INTO sharding1.t1 (uid, name, info, create_by) VALUES (104, 'zero', '{\"age\": 4}', "
            "'0000-00-00 00:00:01')", sql_mode=MODE1)
    run_sql(up2,
            "DELETE FROM sharding1.t3 WHERE name = 'Dvořák'",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (41001, 'Üsküdar', '{\"age\": 0}')",
            "ALTER TABLE sharding1.t2 ADD COLUMN age int",
            "UPDATE sharding1.t2 SET uid = uid + 10000",
            "ALTER TABLE sharding1.t3 ADD COLUMN age int",
            "UPDATE sharding1.t3 SET age = 1",
            "ALTER TABLE sharding1.t2 ADD COLUMN info_json json GENERATED ALWAYS AS (info) VIRTUAL",
            "UPDATE sharding1.t3 SET age = age + 10",
            "ALTER TABLE sharding1.t3 ADD COLUMN info_json json GENERATED ALWAYS AS (info) VIRTUAL",
            "ALTER TABLE sharding1.t3 ADD COLUMN id_gen int AS (uid + 1)",
            "ALTER TABLE sharding1.t2 ADD COLUMN id_gen int AS (uid + 1)",
            "ALTER TABLE sharding1.t2 ADD UNIQUE (id_gen)",
            "ALTER TABLE sharding1.t3 ADD UNIQUE (id_gen)",
            "UPDATE sharding1.t2 SET age = age + 10",
            "ALTER TABLE sharding1.t2 ADD KEY multi_col_idx (uid, id_gen)",
            "ALTER TABLE sharding1.t3 ADD KEY multi_col_idx (uid, id_gen)",
            "UPDATE sharding1.t3 SET age = age + 10",
            "ALTER TABLE sharding1.t2 ADD COLUMN create_by datetime NOT NULL DEFAULT '0000-00-00 00:00:00'",
            "INSERT INTO sharding1.t2 (uid, name, info, create_by) VALUES (105, 'now', '{\"age\": 5}', NOW())",
            "INSERT INTO sharding1.t2 (uid, name, info, create_by) VALUES (106, 'zero', '{\"age\": 6}', "
            "'0000-00-00 00:00:01')",
            "ALTER TABLE sharding1.t3 ADD COLUMN create_by datetime NOT NULL DEFAULT '0000-00-00 00:00:00'",
            "INSERT INTO sharding1.t3 (uid, name, info, create_by) VALUES (107, 'now', '{\"age\": 7}', NOW())",
            "INSERT INTO sharding1.t3 (uid, name, info, create_by) VALUES (108, 'zero', '{\"age\": 8}', "
            "'0000-00-00 00:00:01')", sql_mode=MODE2)
    s1 = task.mysql_instances[0].source_id
    for _ in range(3):  # DM stops worker 1 at three checkpoint stages of the shard DDL and resumes it
        for _ in range(2):
            sync.step()
        sync.restart(s1)
    sync.settle()
    assert table_rows(down, "db_target", "t_target", ALL) == union_rows(shards, ALL)

    # 3. new shards in sharding mode: CREATE DATABASE / CREATE TABLE on both upstreams, rows
    run_sql(up1, "CREATE DATABASE sharding2", *[f"CREATE TABLE sharding2.t{i} {SHARD_DDL.format(ai)}"
                                                for i, ai in ((1, 4000), (2, 5000), (3, 6000))],
            "INSERT INTO sharding1.t1 (uid, name, info, age) VALUES (11007, 'Bruno', '{\"x\": \"y\"}', 1000), "
            "(11008, 'Clara', '{\"ok\": true}', 1001)",
            "INSERT INTO sharding1.t2 (uid, name, info, age) VALUES (21009, 'Dora', '{\"k\": \"v0\"}', 3003)",
            "INSERT INTO sharding2.t1 (uid, name, info, age) VALUES (60001, 'uno', '{\"age\": 301}', 133), "
            "(60002, 'dos', '{\"age\": 302}', 233), (60003, 'tres', '{\"k\": \"v\", \"age\": 303}', 333)",
            "INSERT INTO sharding2.t2 (uid, name, info, age) VALUES (80001, 'cuatro', '{\"age\": 12}', 833), "
            "(80002, 'cinco', NULL, 10000000), (80003, 'seis***', '{\"k\": \"v***\", \"age\": false}', 33300)",
            "INSERT INTO sharding2.t3 (uid, name, info, age) VALUES (90001, 'siete', '{\"age\": \"old\"}', -1), "
            "(90002, 'ocho', '{\"age\": \"young\"}', -1), (90003, 'nueve', '{\"k\": \"v\", \"age\": 0}', -2)",
            sql_mode=MODE1)
    run_sql(up2, "CREATE DATABASE sharding2", f"CREATE TABLE sharding2.t4 {SHARD_DDL.format(7000)}",
            "INSERT INTO sharding2.t4 (uid, name, info) VALUES (70001, 'diez', '{\"age\": 6}'), "
            "(70002, 'once', '{\"age\": 1}'), (70003, 'doce', '{\"k\": \"v\", \"age\": 20}')",
            "INSERT INTO sharding1.t2 (uid, name, info) VALUES (50002, 'trece', '{\"standby\": 1}'), "
            "(50003, 'catorce', '{\"b\": false, \"k\": \"v\"}')",
            "INSERT INTO sharding1.t3 (uid, name, info) VALUES (30004, 'quince', '{\"k1\": \"v0\"}')",
            sql_mode=MODE2)
    sync.settle()
    shards = _shards(up1, up2, True)
    assert table_rows(down, "db_target", "t_target", ALL) == union_rows(shards, ALL)
    high = table_rows(down, "db_target", "t_target", ALL, "WHERE uid > 70000")
    assert len(high) == 9

    # 4. DROP TABLE / TRUNCATE TABLE / DROP DATABASE of shards: ignored downstream in sharding mode
    run_sql(up1, "DROP TABLE sharding2.t2",
            "INSERT INTO sharding1.t1 (uid, name, info, age) VALUES (11009, 'dieciséis', '{\"a\": \"1\"}', 10001), "
            "(11018, '..', '{\"ok\": true}', 10000001)",
            "INSERT INTO sharding1.t2 (uid, name, info, age) VALUES (21010, 'minmax', '{\"k\": \"h\"}', 307003)",
            "TRUNCATE TABLE sharding2.t3",
            "UPDATE sharding1.t2 SET age = age + 1", sql_mode=MODE1)
    run_sql(up2, "DROP DATABASE sharding2", "UPDATE sharding1.t2 SET age = 42", "UPDATE sharding1.t2 SET age = age * 3",
            sql_mode=MODE2)
    sync.settle()
    living = [(up1, "sharding1", "t1"), (up1, "sharding1", "t2"), (up2, "sharding1", "t2"), (up2, "sharding1", "t3"),
              (up1, "sharding2", "t1"), (up1, "sharding2", "t3")]
    assert table_rows(down, "db_target", "t_target", ALL, "WHERE uid < 70000") == \
        union_rows(living, ALL, "WHERE uid < 70000")
    assert table_rows(down, "db_target", "t_target", ALL, "WHERE uid > 70000") == high, \
        "rows of dropped / truncated shards stay downstream"

    # 5. two different DDLs on two shards of one upstream: DM's inconsistent DDL sequence
    run_sql(up1, "ALTER TABLE sharding1.t1 ADD COLUMN new_col1 int", "ALTER TABLE sharding1.t2 ADD COLUMN new_col2 int")
    states = sync.settle(paused_ok=True)
    assert states[s1] == "paused", states
    err = store.source_state(task.name, s1)["error"]
    assert "inconsistent" in err.lower() and "new_col1" in err and "new_col2" in err, err
    rc, out, _ = dmctl("query-status", task.name)
    assert "inconsistent" in out.lower()
    store.request_sources(task.name, [s1], "running", all_sources=[i.source_id for i in task.mysql_instances],
                          clear_error=True)
    states = sync.settle(paused_ok=True)
    assert states[s1] == "paused" and "inconsistent" in store.source_state(task.name, s1)["error"].lower()

