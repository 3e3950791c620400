"""DML build: safe mode vs normal, keys from the downstream table, values always parameters."""

import datetime
import decimal

import pytest

from dm_core.sync.dml import DMLBuilder, to_db_value
from dm_core.target import TargetTable

PK = TargetTable("db", "t", ("id", "v"), ("id",), True)
NOKEY = TargetTable("db", "t", ("a", "b"), ("a", "b"), False)

CASES = [
    # table, op, before, after, safe, expected [(sql, params)]
    (PK, "insert", None, {"id": 1, "v": "x"}, False, [("INSERT INTO `db`.`t` (`id`, `v`) VALUES (%s, %s)", (1, "x"))]),
    (PK, "insert", None, {"id": 1, "v": "x"}, True, [("REPLACE INTO `db`.`t` (`id`, `v`) VALUES (%s, %s)", (1, "x"))]),
    (PK, "update", {"id": 1, "v": "x"}, {"id": 2, "v": "y"}, False,
     [("UPDATE `db`.`t` SET `id` = %s, `v` = %s WHERE `id` = %s", (2, "y", 1))]),
    (PK, "update", {"id": 1, "v": "x"}, {"id": 2, "v": "y"}, True,
     [("DELETE FROM `db`.`t` WHERE `id` = %s", (1,)), ("REPLACE INTO `db`.`t` (`id`, `v`) VALUES (%s, %s)", (2, "y"))]),
    (PK, "delete", {"id": 1, "v": "x"}, None, True, [("DELETE FROM `db`.`t` WHERE `id` = %s", (1,))]),
    (NOKEY, "insert", None, {"a": 1, "b": None}, True,
     [("DELETE FROM `db`.`t` WHERE `a` <=> %s AND `b` <=> %s LIMIT 1", (1, None)),
      ("INSERT INTO `db`.`t` (`a`, `b`) VALUES (%s, %s)", (1, None))]),
    (NOKEY, "delete", {"a": None, "b": 2}, None, False, [("DELETE FROM `db`.`t` WHERE `a` <=> %s AND `b` <=> %s LIMIT 1", (None, 2))]),
]


@pytest.mark.parametrize("tt,op,before,after,safe,expected", CASES)
def test_build(tt, op, before, after, safe, expected):
    got = [(s.sql, s.params) for s in DMLBuilder(tt).build(op, before, after, safe)]
    assert got == expected


def test_identifiers_are_quoted():
    tt = TargetTable("we`ird", "t`1", ("c`ol",), ("c`ol",), True)
    sql = DMLBuilder(tt).build("insert", None, {"c`ol": 1}, False)[0].sql
    assert sql == "INSERT INTO `we``ird`.`t``1` (`c``ol`) VALUES (%s)"


@pytest.mark.parametrize("value,expected", [
    ({"a": [1, "é"]}, '{"a": [1, "é"]}'),
    ({"x", "a"}, "a,x"),
    (decimal.Decimal("1.50"), decimal.Decimal("1.50")),
    (datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.datetime(2024, 1, 2, 3, 4, 5)),
    (b"\x00\xff", b"\x00\xff"),
    (None, None),
])
def test_binlog_values_round_trip(value, expected):
    assert to_db_value(value) == expected
