"""`dmctl validate`'s comparison on real servers: shards merged by route and partition-id
mapping vs the downstream table, streamed. Equal tables compare equal; each kind of damage
downstream is reported as the rows a user would look for."""

import pytest

from dm_core.validate import compare
from dm_core.validate.compare import compare_task, render

from .shard_helpers import SourceSpec, query, run, setup_shards, teardown

pytestmark = pytest.mark.integration


@pytest.fixture
def merged(stack, uniq, tmp_path):
    p = f"vc{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1", f"{p}_2"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, rows=30)
    yield setup
    teardown(setup)


def _down_rows(setup):
    return query(setup.down, f"SELECT id, name, amount FROM `{setup.tdb}`.`t` ORDER BY id")


def _norm(row):
    return tuple(compare._norm(v) for v in row)


def test_equal_tables_compare_equal_with_counts_and_checksums(merged):
    d = compare_task(merged.task, merged.store)
    assert len(d) == 1, render(d)
    assert d[0].equal and d[0].upstream_rows == 5 * 30 and d[0].missing == d[0].extra == [], render(d)
    assert d[0].upstream_checksum == d[0].downstream_checksum


# (what is done downstream, rows missing downstream, rows extra downstream) over the sorted rows
DAMAGE = [
    ("deleted", lambda rows: ([f"DELETE FROM {{t}} WHERE id = {rows[0][0]}"], [rows[0]], [])),
    ("changed", lambda rows: ([f"UPDATE {{t}} SET amount = amount + 1 WHERE id = {rows[1][0]}"],
                              [rows[1]], [(rows[1][0], rows[1][1], rows[1][2] + 1)])),
    ("duplicated", lambda rows: ([f"ALTER TABLE {{t}} MODIFY id bigint NOT NULL, DROP PRIMARY KEY",
                                  f"INSERT INTO {{t}} SELECT * FROM {{t}} WHERE id = {rows[2][0]}"], [], [rows[2]])),
]


@pytest.mark.parametrize("kind, damage", DAMAGE, ids=[k for k, _ in DAMAGE])
def test_damage_downstream_is_named_row_by_row(merged, kind, damage):
    rows = _down_rows(merged)
    stmts, missing, extra = damage(rows)
    run(merged.down, *[s.format(t=f"`{merged.tdb}`.`t`") for s in stmts])
    d = compare_task(merged.task, merged.store)[0]
    assert not d.equal, render([d])
    assert d.missing == [_norm(r) for r in missing], render([d])
    assert d.extra == [_norm(r) for r in extra], render([d])
    assert d.downstream_rows - d.upstream_rows == len(extra) - len(missing)


def test_one_bad_row_is_found_while_reading_only_its_bucket(merged, monkeypatch):
    """Pass 2 keeps just the rows of differing buckets: with the cap at one row a side, the
    one changed row is still named (its bucket holds it alone, or first)."""
    monkeypatch.setattr(compare, "BUCKETS", 1 << 16)
    rows = _down_rows(merged)
    run(merged.down, f"UPDATE `{merged.tdb}`.`t` SET name = 'damaged' WHERE id = {rows[5][0]}")
    seen = []
    real = compare._sample

    def sample(side, buckets):
        got = real(side, buckets)
        seen.append(sum(got.values()))
        return got
    monkeypatch.setattr(compare, "_sample", sample)
    d = compare_task(merged.task, merged.store)[0]
    assert d.missing == [_norm(rows[5])] and d.extra == [_norm((rows[5][0], "damaged", rows[5][2]))], render([d])
    assert max(seen) <= 2, f"pass 2 kept {seen} rows for one damaged row of {len(rows)}"
