"""DML build: safe mode vs normal, keys from the downstream table, values always parameters."""

import datetime
import decimal
import json

import pytest
from MySQLdb import _mysql

from dm_core.binlog.decode import json_value
from dm_core.jsondoc import json_text
from dm_core.sync.dml import DMLBuilder, to_db_value
from dm_core.sync.literal import Renderer
from dm_core.target import TargetTable
from tests.unit.test_binlog_decode import encode_json, opaque_decimal

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


# ---- MySQL JSON values, as the binlog reader decodes them, written downstream -----------------
class _Conn:
    """What ``literal.Renderer`` asks of a mysqlclient connection; escaping is mysqlclient's own."""
    string_literal = staticmethod(_mysql.string_literal)

    def cursor(self):
        return self

    def execute(self, sql):
        raise OSError("no server")  # the renderer falls back to MySQL's smallest max_allowed_packet

    def close(self):
        pass


DOC = {"id": 2**64 - 1, "neg": -(2**63), "p": opaque_decimal("1.50", 5, 2),
       "wide": opaque_decimal("12345678901234567890.123456789", 65, 30), "f": 0.1, "e": 1e300,
       "s": "é'\"\\😀", "l": [None, True, False, -0.0, []], "zz": {}, "a": 1}
DOC_TEXT = ('{"id": 18446744073709551615, "neg": -9223372036854775808, "p": 1.50, '
            '"wide": 12345678901234567890.123456789000000000000000000000, "f": 0.1, "e": 1e+300, '
            '"s": "é\'\\"\\\\😀", "l": [null, true, false, -0.0, []], "zz": {}, "a": 1}')


@pytest.mark.parametrize("value,text", [
    (DOC, DOC_TEXT),                            # exact digits, shortest floats, text as is, keys in order
    ([DOC, [opaque_decimal("-0.5", 2, 1)]], f'[{DOC_TEXT}, [-0.5]]'),
    ("say \"hi\"", '"say \\"hi\\""'),           # a bare scalar document: its JSON text
    (None, "null"),                             # JSON null, not SQL NULL
    (True, "true"),
    (2**64 - 1, "18446744073709551615"),
    (opaque_decimal("1.50", 5, 2), "1.50"),
])
def test_json_column_values_are_written_as_exact_json_text(value, text):
    t, body = encode_json(value)
    doc = json_value(bytes([t]) + body)
    assert to_db_value(doc) == text
    assert json.loads(text, parse_float=decimal.Decimal) == json.loads(to_db_value(doc), parse_float=decimal.Decimal)
    sql = "INSERT INTO `db`.`t` (`id`, `j`) VALUES (%s, %s)"
    assert Renderer(_Conn()).render(sql, (1, doc)) == \
        b"INSERT INTO `db`.`t` (`id`, `j`) VALUES (1, " + _mysql.string_literal(text.encode()) + b")"


def test_json_text_refuses_what_json_cannot_hold():
    with pytest.raises(ValueError):
        json_text({"x": float("nan")})
    with pytest.raises(ValueError):
        json_text([decimal.Decimal("Infinity")])
    with pytest.raises(TypeError):
        json_text({b"k": decimal.Decimal(1)})
