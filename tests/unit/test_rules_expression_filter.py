"""Expression filters: MySQL expression semantics on rows, DM's skip rules, Spark SQL for the full load."""

import datetime as dt

import pytest

from dm_core.binlog.decode import json_value
from dm_core.jsondoc import json_text
from dm_core.rules.expression_filter import ExpressionFilter, ExprFilterRule
from dm_core.rules.patterns import RuleError
from tests.unit.test_binlog_decode import encode_json, opaque_decimal

COLUMNS = ["id", "c", "name", "price", "created", "note"]
ROW = {"id": 1, "c": 4, "name": "Alice", "price": 9.5, "created": dt.datetime(2024, 5, 6, 7, 8, 9), "note": None}

# expression, row changes, skipped?
INSERT_CASES = [
    ("c % 2 = 0", {}, True),
    ("c % 2 = 0", {"c": 3}, False),
    ("c % 2 = 0", {"c": None}, False),                    # NULL is not true
    ("c > 3 AND name = 'Alice'", {}, True),
    ("c > 3 AND note = 'x'", {}, False),                  # TRUE AND NULL is NULL
    ("c > 9 AND note = 'x'", {}, False),
    ("c > 3 OR note = 'x'", {}, True),                    # TRUE OR NULL is TRUE
    ("c > 9 OR note = 'x'", {}, False),
    ("NOT (c > 9)", {}, True),
    ("NOT (note = 'x')", {}, False),
    ("note IS NULL", {}, True),
    ("note IS NOT NULL", {}, False),
    ("c IN (1, 2, 4)", {}, True),
    ("c IN (1, NULL)", {}, False),
    ("c NOT IN (1, NULL)", {}, False),                    # NULL: kept
    ("c NOT IN (1, 2)", {}, True),
    ("c BETWEEN 4 AND 10", {}, True),
    ("c NOT BETWEEN 4 AND 10", {}, False),
    ("name LIKE 'A%'", {}, True),
    ("name LIKE 'a%'", {}, False),                        # binary comparison, as Spark
    ("name NOT LIKE '_lice'", {}, False),
    ("name LIKE 'A!%' ESCAPE '!'", {"name": "A%"}, True),
    ("name REGEXP '^Al'", {}, True),
    ("name RLIKE 'z$'", {}, False),
    ("length(name) = 5", {}, True),
    ("length(name) = 2", {"name": "é"}, True),            # LENGTH counts bytes
    ("char_length(name) = 1", {"name": "é"}, True),
    ("lower(name) = 'alice' AND upper(name) = 'ALICE'", {}, True),
    ("concat(name, '-', c) = 'Alice-4'", {}, True),
    ("concat(name, note) IS NULL", {}, True),
    ("substring(name, 2, 3) = 'lic'", {}, True),
    ("substr(name, -2) = 'ce'", {}, True),
    ("trim(name) = 'Alice'", {"name": "  Alice "}, True),
    ("price * 2 = 19", {}, True),
    ("price / 0 IS NULL", {}, True),
    ("c DIV 3 = 1", {}, True),
    ("c DIV 0 IS NULL AND c % 0 IS NULL", {}, True),
    ("-7 % 3 = -1 AND 7 % -3 = 1", {}, True),             # MOD takes the dividend's sign
    ("-c + 10 = 6", {}, True),
    ("c = '4'", {}, True),                                # string vs number: numeric
    ("c = '4abc'", {}, True),
    ("created > '2024-01-01'", {}, True),
    ("created = '2024-05-06 07:08:09'", {}, True),
    ("ifnull(note, 'n') = 'n'", {}, True),
    ("if(c > 3, 1, 0)", {}, True),
    ("CASE WHEN c > 10 THEN 0 ELSE 1 END", {}, True),
    ("c", {}, True),                                      # a number is true when non-zero
    ("c", {"c": 0}, False),
    ("c & 4", {}, True),
    ("c <=> NULL", {}, False),
    ("note <=> NULL", {}, True),
    ("`Name` = 'Alice'", {}, True),                       # column names are case-insensitive
]


@pytest.mark.parametrize("expr,change,skipped", INSERT_CASES)
def test_skip_insert(expr, change, skipped):
    f = ExpressionFilter([ExprFilterRule("r", "db", "tbl", insert_value_expr=expr)]).compile("db", "tbl", COLUMNS)
    assert f.skip_insert({**ROW, **change}) is skipped


# old expr, new expr, old row changes, new row changes, skipped?
UPDATE_CASES = [
    ("c < 10", "c > 100", {}, {"c": 101}, True),
    ("c < 10", "c > 100", {}, {"c": 50}, False),
    ("c < 10", "c > 100", {"c": 20}, {"c": 101}, False),
    ("c < 10", "", {}, {"c": 50}, True),                  # a missing expression counts as true
    ("", "c > 100", {"c": 500}, {"c": 101}, True),
    ("", "c > 100", {}, {"c": None}, False),
]


@pytest.mark.parametrize("old_expr,new_expr,old,new,skipped", UPDATE_CASES)
def test_skip_update(old_expr, new_expr, old, new, skipped):
    rule = ExprFilterRule("u", "db", "tbl", update_old_value_expr=old_expr, update_new_value_expr=new_expr)
    f = ExpressionFilter([rule]).compile("db", "tbl", COLUMNS)
    assert f.skip_update({**ROW, **old}, {**ROW, **new}) is skipped
    assert f.skip_insert(ROW) is False and f.skip_delete(ROW) is False


def test_rules_of_one_table_combine_and_other_tables_are_untouched():
    ef = ExpressionFilter([
        ExprFilterRule("even", "db", "tbl", insert_value_expr="c % 2 = 0"),
        ExprFilterRule("big", "db", "tbl", insert_value_expr="c > 100"),
        ExprFilterRule("del", "DB", "TBL", delete_value_expr="name = 'tmp'"),
        ExprFilterRule("elsewhere", "db", "other", insert_value_expr="c = 1"),
    ])
    f = ef.compile("db", "tbl", COLUMNS)
    assert [n for n, _ in f.inserts] == ["even", "big"]
    assert f.skip_insert({**ROW, "c": 3}) is False
    assert f.skip_insert({**ROW, "c": 101}) is True
    assert f.skip_delete({**ROW, "name": "tmp"}) is True          # schema/table names ignore case
    assert ef.compile("db", "nothing", COLUMNS) is None
    assert ef.compile("db", "tbl", COLUMNS) is f                  # bound once per table schema


def test_case_sensitive_names():
    ef = ExpressionFilter([ExprFilterRule("r", "DB", "t", insert_value_expr="c = 1")], case_sensitive=True)
    assert ef.compile("db", "t", ["c"]) is None
    assert ef.compile("DB", "t", ["c"]) is not None


def test_unknown_column_is_false_and_named(caplog):
    """DM's getSimpleExprOfTable: an unknown column makes the expression constant false (a warning
    in its log), so no row is skipped; the task goes on."""
    ef = ExpressionFilter([ExprFilterRule("even_c", "db", "tbl", insert_value_expr="missing_col % 2 = 0")])
    with caplog.at_level("WARNING"):
        f = ef.compile("db", "tbl", COLUMNS)
    assert f.skip_insert(ROW) is False
    assert f.unknown_columns == [("even_c", "insert-value-expr", "missing_col")]
    assert "expression-filter 'even_c'" in caplog.text and "`missing_col`" in caplog.text


@pytest.mark.parametrize("rule,key", [
    (ExprFilterRule("r", "db", "tbl", insert_value_expr="c >"), "insert-value-expr"),
    (ExprFilterRule("r", "db", "tbl", delete_value_expr="c = 1 LIMIT 1"), "delete-value-expr"),
    (ExprFilterRule("r", "db", "tbl", insert_value_expr="now() > c"), "insert-value-expr"),
    (ExprFilterRule("r", "db", "tbl", insert_value_expr="c IN (SELECT 1)"), "insert-value-expr"),
    (ExprFilterRule("r", "db", "tbl", insert_value_expr="c = 1", delete_value_expr="c = 2"), ""),
    (ExprFilterRule("r", "db", "tbl"), ""),
    (ExprFilterRule("r", "", "tbl", insert_value_expr="c = 1"), "schema"),
    (ExprFilterRule("r", "db", "", insert_value_expr="c = 1"), "table"),
])
def test_invalid_rules(rule, key):
    with pytest.raises(RuleError) as e:
        ExpressionFilter([rule])
    assert e.value.key == key


# ---- JSON columns -------------------------------------------------------------------------
def _binary_json(v):
    """``v`` as the binlog reader hands over a MySQL binary JSON value of it."""
    t, body = encode_json(v)
    return json_value(bytes([t]) + body)


DOC = {"id": 1, "name": "x", "tags": ["a", "é"], "o": {"b": 2.5, "p": opaque_decimal("1.50", 5, 2)},
       "big": 2**64 - 1, "ok": True}
# expression, the value of j, skipped?  (p is the opaque DECIMAL 1.50)
JSON_CASES = [
    ('j->"$.id" = 1', DOC, True),
    ('j->"$.id" = 2', DOC, False),
    ("JSON_EXTRACT(j, '$.name') = 'x'", DOC, True),
    ("JSON_EXTRACT(j, '$.name') = 'y'", DOC, False),
    ('j->>"$.tags[1]" = \'é\'', DOC, True),
    ('j->"$.o.b" = 2.5', DOC, True),
    ('j->"$.o.p" = 1.5', DOC, True),
    ('j->"$.big" = 18446744073709551615', DOC, True),
    ('j->"$.o" IS NOT NULL', DOC, True),                  # a nested object holding a Decimal
    ('j->"$.missing" IS NULL', DOC, True),
    ('j->"$" = 7', 7, True),                               # a document that is a bare scalar
    ("j LIKE '%\"name\": \"x\"%'", DOC, True),              # a whole document reads as its JSON text
    ("j = 1", DOC, False),
]


@pytest.mark.parametrize("expr,doc,skipped", JSON_CASES)
@pytest.mark.parametrize("source", ["mysql", "mariadb"])
def test_json_paths_on_decoded_and_text_documents(expr, doc, skipped, source):
    """MySQL's binary JSON comes decoded (dict / list, JsonText for a bare scalar); MariaDB's
    JSON is LONGTEXT, so its value is the JSON text: both filter alike."""
    value = _binary_json(doc)
    if source == "mariadb":
        value = value if isinstance(value, str) else json_text(value)
    f = ExpressionFilter([ExprFilterRule("r", "db", "tbl", insert_value_expr=expr)]).compile("db", "tbl", ["id", "j"])
    assert f.skip_insert({"id": 1, "j": value}) is skipped
