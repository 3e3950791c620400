"""Generated columns (VIRTUAL and STORED) in a pessimistic shard group on real servers: the
reported case (ADD COLUMN ... GENERATED ALWAYS AS (...) VIRTUAL on every shard, then a unique
key over it, then rows). The downstream computes them: no statement may write them (errors
3105 / 1906), so sync leaves them out; the merged table carries them with their expression."""

import pytest

from dm_core.db import qt

from .shard_helpers import (SourceSpec, assert_settled, assert_union, drive, dml, query, run, setup_shards,
                            teardown)

pytestmark = pytest.mark.integration

ADD = [
    "ALTER TABLE {t} ADD COLUMN info_json varchar(200) GENERATED ALWAYS AS "
    "(concat('{{\"name\":\"', ifnull(name, ''), '\"}}')) VIRTUAL",
    "ALTER TABLE {t} ADD COLUMN total decimal(12,2) AS (amount * 2) STORED",
    "ALTER TABLE {t} ADD UNIQUE KEY uk_info (id, info_json)",
]


@pytest.mark.parametrize("mode", ["pessimistic", "optimistic"])
def test_generated_columns_added_keyed_and_written_converge(stack, uniq, tmp_path, mode):
    prefix = f"gc{uniq}"
    setup = setup_shards(uniq, [SourceSpec("g1-" + uniq, stack["up1"], [f"{prefix}_1"], ["t_1", "t_2"], 1),
                                SourceSpec("g2-" + uniq, stack["up2"], [f"{prefix}_2"], ["t_1"], 2)],
                         stack["down"], tmp_path, prefix=prefix, shard_mode=mode)
    try:
        for i, sh in enumerate(setup.shards):
            dml(sh.ep, sh.schema, sh.table, f"before{i}")
            run(sh.ep, *[s.format(t=sh.q) for s in ADD])
            dml(sh.ep, sh.schema, sh.table, f"after{i}")
            run(sh.ep, f"UPDATE {sh.q} SET name = concat(name, '!') WHERE name LIKE 'after%'")
        assert_settled(drive(setup.task, setup.store, setup.sources))
        create = query(setup.down, f"SHOW CREATE TABLE {qt(setup.tdb, 't')}")[0][1]
        assert "GENERATED ALWAYS AS" in create.upper() or " AS (" in create, create
        assert "VIRTUAL" in create.upper() and ("STORED" in create.upper() or "PERSISTENT" in create.upper()), create
        assert "uk_info" in create
        assert_union(setup.task, setup.store)  # the union, generated columns included (computed downstream)
        got = query(setup.down, f"SELECT COUNT(*) FROM {qt(setup.tdb, 't')} WHERE info_json LIKE %s "
                                "AND total = amount * 2", ("%after%!%",))
        assert got[0][0] == 4 * len(setup.shards), got  # 5 inserted, 1 deleted, per shard
    finally:
        teardown(setup)
