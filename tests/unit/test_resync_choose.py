"""What a re-sync rewrites, from its Params and the last validation (dm_core/resync/choose.py)."""

import pytest

from dm_core.errors import ShardflowError
from dm_core.resync.choose import choose, keys_of

LAST = {"run_id": "scheduled__1", "tables": [
    {"target": "db.t", "differences": [{"kind": "changed", "key": {"id": "5"}}, {"kind": "missing", "key": {"id": "9"}}],
     "pending": [{"kind": "extra", "key": {"id": "11"}}], "more_differences": 0},
    {"target": "db.big", "differences": [{"kind": "missing", "key": {"id": "1"}}], "more_differences": 40},
    {"target": "db.broken", "error": "table gone", "differences": []},
    {"target": "db.same", "differences": [], "pending": []},
]}


def test_keys_of_a_validation_names_rows_and_tables_to_compare_again():
    keys, again = keys_of(LAST)
    assert keys == {"db.t": [{"id": "5"}, {"id": "9"}, {"id": "11"}]}   # pending rows too
    assert again == ["db.big", "db.broken"]        # not every difference named / not compared
    assert keys_of(LAST, {"db.same"}) == ({}, [])


CHOICES = [  # what, tables, last, known -> compare, tables with keys, or the error's words
    ("last_validation", [], LAST, [], (["db.big", "db.broken"], ["db.t"])),
    ("tables", ["db.t", " db.t "], None, ["db.t", "db.u"], (["db.t"], [])),
    ("tables", [], None, ["db.t"], "Param tables: empty"),
    ("tables", ["db.nope"], None, ["db.t"], "db.nope not a target table"),
    ("last_validation", [], None, [], "no validation of the task has finished"),
    ("everything", [], LAST, [], "Param what"),
]


@pytest.mark.parametrize("what, tables, last, known, expected", CHOICES)
def test_choose(what, tables, last, known, expected):
    if isinstance(expected, str):
        with pytest.raises(ShardflowError, match=expected):
            choose(what, tables, last, known)
        return
    c = choose(what, tables, last, known)
    assert (c.compare, sorted(c.keys)) == expected
    assert c.to_dict()["compare"] == c.compare
