"""tiflow dm/syncer (expr_filter_group_test.go), its data as our own table-driven test: an
expression, a row it skips, a row it keeps, for each column type of MySQL's binary protocol.

Values are given as shardflow's binlog reader hands them over (dm_core/binlog/decode.py), where
DM's test gives the go-mysql forms: ENUM as its member (DM: the index), SET as the set of its
members (DM: the bit mask), DECIMAL as Decimal (DM: text), times as datetime/date/timedelta,
BIT as Bits, MySQL's binary JSON decoded (and as text, as MariaDB's JSON and DM's test give it).
"""

import datetime as dt
from decimal import Decimal

import pytest

from dm_core.binlog.decode import json_value
from dm_core.bits import Bits
from dm_core.rules.expression_filter import ExpressionFilter, ExprFilterRule
from tests.unit.test_binlog_decode import encode_json


def _binary_json(doc):
    t, body = encode_json(doc)
    return json_value(bytes([t]) + body)


# expression, columns, a row it skips, a row it keeps
CASES = [
    # TestSkipDMLByExpression
    ("state != 1", ["primary_id", "id", "state"], [100, 100, 3], [100, 100, 1]),
    ("f > 1.23", ["f"], [2.0], [1.0]),
    ("f > a + b", ["f", "a", "b"], [123.45, 1, 2], [0.01, 23, 45]),
    ("id = 30", ["id", "name", "dt", "ts"], [30, "30", None, dt.datetime(2021, 6, 17, 10, 13, 5)],
     [20, "20", None, dt.datetime(2021, 6, 17, 10, 13, 5)]),
    # TestSkipDMLByExpressionWithHiddenColumnBeforeVisibleColumn (rows by name: no hidden column to skip)
    ("b = 'Bob'", ["id", "a", "b"], [1, "Alice", "Bob"], [2, "Alice", "Charlie"]),
    # TestAllBinaryProtocolTypes
    ("c IS NULL", ["c"], [None], [100]),                                    # NULL
    ("c = 1", ["c"], [1], [100]),                                           # LONG
    ("c = 2", ["c"], [2], [-1]),                                            # TINY
    ("c < 10", ["c"], [8], [18]),                                           # SHORT
    ("c < 0", ["c"], [-8], [1]),                                            # INT24
    ("c = 100000000", ["c"], [100000000], [200000000]),                     # LONGLONG
    ("c = 10.1", ["c"], [Decimal("10.10")], [Decimal("10.11")]),            # NEWDECIMAL
    ("c < 0.1", ["c"], [0.07999999821186066], [0.18000000715255737]),      # FLOAT (a float32 widened)
    ("c < 0.1", ["c"], [0.08], [0.18]),                                     # DOUBLE
    ("c = b'1'", ["c"], [Bits("0001")], [Bits("0010")]),                    # BIT
    ("c = '2021-06-21 12:34:56'", ["c"], [dt.datetime(2021, 6, 21, 12, 34, 56)],
     [dt.datetime(1970, 1, 1, 0, 0, 1)]),                                   # TIMESTAMP
    ("c = '2021-06-21 00:00:12'", ["c"], [dt.datetime(2021, 6, 21, 0, 0, 12)],
     [dt.datetime(1970, 1, 1, 0, 0, 1)]),                                   # DATETIME
    ("c = '00:00:12'", ["c"], [dt.timedelta(seconds=12)], [dt.timedelta(seconds=1)]),     # TIME
    ("c = '2021-06-21'", ["c"], [dt.date(2021, 6, 21)], [dt.date(1970, 1, 1)]),           # DATE
    ("c = '2021'", ["c"], [2021], [2020]),                                  # YEAR
    ("c = 'x-small'", ["c"], ["x-small"], ["small"]),                       # ENUM
    ("find_in_set('c', c) > 0", ["c"], [{"c", "d"}], [{"d"}]),             # SET
    ("c = x'1234'", ["c"], [b"\x124"], [b"Vx"]),                            # BLOB against a hex literal
    ("c = 'abc'", ["c"], ["abc"], ["def"]),                                 # VARCHAR
    ('c->"$.id" = 1', ["c"], [_binary_json({"id": 1})], [_binary_json({"id": 2})]),     # JSON, MySQL
    ('c->"$.id" = 1', ["c"], ['{"id": 1}'], ['{"id": 2}']),               # JSON as text (MariaDB)
    ('c->"$.id" = 1', ["c"], [b'{"id": 1}'], [b'{"id": 2}']),             # JSON as bytes (DM's test)
]


@pytest.mark.parametrize("expr,columns,skipped,kept", CASES)
def test_insert_expression(expr, columns, skipped, kept):
    f = ExpressionFilter([ExprFilterRule("r", "test", "t", insert_value_expr=expr)]).compile("test", "t", columns)
    assert f.skip_insert(dict(zip(columns, skipped))) is True
    assert f.skip_insert(dict(zip(columns, kept))) is False


def test_expression_on_a_column_the_table_lacks_skips_nothing():
    """TestExpressionContainsNonExistColumn: DM swaps in a constant 0 and the task goes on."""
    f = ExpressionFilter([ExprFilterRule("r", "test", "t", insert_value_expr="d > 1")]).compile("test", "t", ["c"])
    assert f.skip_insert({"c": 0}) is False and f.skip_insert({"c": 2}) is False
    assert f.unknown_columns == [("r", "insert-value-expr", "d")]


def test_update_expressions_come_in_pairs():
    """TestGetUpdateExprsSameLength: every update rule has an old and a new side (a missing one is true)."""
    rules = [ExprFilterRule("i", "test", "t", insert_value_expr="c > 1"),
             ExprFilterRule("o", "test", "t", update_old_value_expr="c > 1"),
             ExprFilterRule("n", "test", "t", update_new_value_expr="c > 1"),
             ExprFilterRule("b", "test", "t", update_old_value_expr="c > 1", update_new_value_expr="c > 1")]
    f = ExpressionFilter(rules).compile("test", "t", ["c"])
    assert [(name, old is not None, new is not None) for name, old, new in f.updates] == [
        ("o", True, False), ("n", False, True), ("b", True, True)]
    assert f.skip_update({"c": 5}, {"c": 0}) is True          # rule o: old true, new side missing
    assert f.skip_update({"c": 0}, {"c": 0}) is False


@pytest.mark.parametrize("expr,value,skipped", [
    ("c = x'41'", 65, True),                # a hex literal against a number is its number
    ("c = 0x41", "A", True),                # against a string, its bytes
    ("c = x'41'", "B", False),
    ("c < x'42'", b"A", True),
    # the value 2: shardflow skips on any non-zero value, DM only on exactly 1 (docs/compatibility.md)
    ("find_in_set('b', c)", "a,b,c", True),
    ("find_in_set('b', c) = 2", "a,b,c", True),
    ("find_in_set('b', c) = 0", "a,bc", True),
    ("find_in_set('b', c) IS NULL", None, True),
])
def test_hex_literals_and_find_in_set(expr, value, skipped):
    f = ExpressionFilter([ExprFilterRule("r", "test", "t", insert_value_expr=expr)]).compile("test", "t", ["c"])
    assert f.skip_insert({"c": value}) is skipped
