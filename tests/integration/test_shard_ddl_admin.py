"""What an operator sees of a stuck shard DDL lock and how they release it, through `dmctl`
on the real servers (issue 6: state visible in `dmctl shard-ddl-lock` / `query-status`,
recovery with `dmctl shard-ddl-lock unlock`).

The lock is stuck the way it is in production: one source ran the ALTER on all its shards,
the other source has not (yet). Sources sync with ``drive`` (their sensors' windows);
dmctl runs as a real subprocess against the same state store.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from dm_core.shardddl import coordinator

from ..conftest import ROOT
from .shard_helpers import (SourceSpec, assert_settled, assert_union, columns, dml, drive, run, setup_shards,
                            teardown)

pytestmark = pytest.mark.integration


def dmctl(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([str(ROOT / ".venv" / "bin" / "dmctl"), *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(params=["pessimistic"])
def two(stack, uniq, tmp_path, request):
    p = f"ad{uniq}"
    specs = [SourceSpec(f"a-{uniq}", stack["up1"], [f"{p}_1"], ["t_1", "t_2"], 1),
             SourceSpec(f"b-{uniq}", stack["up2"], [f"{p}_1"], ["t_1"], 2)]
    setup = setup_shards(uniq, specs, stack["down"], tmp_path, prefix=p, shard_mode=request.param)
    yield setup
    teardown(setup)


def test_a_lock_waiting_for_a_source_is_listed_then_unlocked_by_the_owner(two):
    setup = two
    a, b = setup.sources
    for sh in setup.of(a):
        run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN note varchar(16) NULL")
        run(sh.ep, f"INSERT INTO {sh.q} (name, amount, note) VALUES ('after', 1, 'n')")
    for sh in setup.of(b):
        dml(sh.ep, sh.schema, sh.table, "b-before", n=3)
    last = drive(setup.task, setup.store, setup.sources, max_rounds=3, fail=False)
    assert last[a].waiting, "source a must wait for b on the lock"

    listed = dmctl("shard-ddl-lock", setup.name)
    assert listed.returncode == 0, listed.stderr
    locks = json.loads(listed.stdout)["locks"]
    assert len(locks) == 1, locks
    lk = locks[0]
    assert lk["status"] == "waiting" and lk["owner"] == a
    assert lk["reported"] == [a] and lk["waiting_for"] == [b]
    assert lk["ddls"] == [f"ALTER TABLE `{setup.tdb}`.`t` ADD COLUMN `note` VARCHAR(16) NULL"]
    assert lk["waiting_since"], "a waiting lock says since when"

    status = json.loads(dmctl("query-status", setup.name).stdout)["tasks"][0]
    assert [x["lock_id"] for x in status["ddl_locks"]] == [lk["lock_id"]]

    # b is not going to run the DDL soon: the operator lets a execute it now
    out = dmctl("shard-ddl-lock", "unlock", lk["lock_id"], "--owner", a)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["lock"]["status"] in ("ready", "idle")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert "note" in [c for c, _ in columns(setup.down, setup.tdb, "t")]

    # b reaches the DDL later: it was released, so it skips it (the downstream has it already)
    for sh in setup.of(b):
        run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN note varchar(16) NULL")
        run(sh.ep, f"INSERT INTO {sh.q} (name, amount, note) VALUES ('b-after', 2, 'm')")
    assert_settled(drive(setup.task, setup.store, setup.sources))
    assert not coordinator.list_locks(setup.store, setup.name, active_only=True)
    assert_union(setup.task, setup.store)


def test_unlock_of_an_unknown_lock_names_it_and_how_to_find_the_right_one(two):
    out = dmctl("shard-ddl-lock", "unlock", "no-such-lock")
    assert out.returncode == 1
    assert "no-such-lock" in out.stderr and "dmctl shard-ddl-lock TASK" in out.stderr


def test_unlock_with_an_owner_that_never_reported_is_refused_naming_who_can(two):
    setup = two
    a, b = setup.sources
    for sh in setup.of(a):
        run(sh.ep, f"ALTER TABLE {sh.q} ADD COLUMN note2 int NULL")
    drive(setup.task, setup.store, setup.sources, max_rounds=3, fail=False)
    [lk] = coordinator.list_locks(setup.store, setup.name, active_only=True)
    out = dmctl("shard-ddl-lock", "unlock", lk["lock_id"], "--owner", b)
    assert out.returncode == 1
    assert b in out.stderr and a in out.stderr, out.stderr
    assert coordinator.list_locks(setup.store, setup.name, active_only=True)[0]["status"] == "waiting"
