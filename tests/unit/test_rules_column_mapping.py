"""Column mapping: DM's partition id bit layout, add prefix/suffix, rule selection and errors."""

from decimal import Decimal

import pytest

from dm_core.errors import ShardflowError
from dm_core.rules.column_mapping import (AddPrefix, AddSuffix, ColumnMapper, ColumnMappingRule, PartitionId,
                                          partition_or_value)
from dm_core.rules.patterns import RuleError


def pid(args, schema="schema_2", table="table_3", cs=False):
    return partition_or_value(args, schema, table, cs)


# arguments, schema, table, expected high bits  (1 sign | 4 instance | 7 schema | 8 table | 44 id)
LAYOUT = [
    (["1", "schema_", "table_"], "schema_2", "table_3", 1 << 59 | 2 << 52 | 3 << 44),
    (["15", "schema_", "table_"], "schema_127", "table_255", 15 << 59 | 127 << 52 | 255 << 44),
    (["0", "schema_", "table_"], "schema_0", "table_0", 0),
    (["1", "", "table_"], "schema_2", "table_3", 1 << 59 | 3 << 51),       # seed docs' example
    (["1", "schema_", ""], "schema_2", "table_3", 1 << 59 | 2 << 52),
    (["", "schema_", "table_"], "schema_2", "table_3", 2 << 56 | 3 << 48),
    (["", "", "table_"], "schema_2", "table_3", 3 << 55),
    (["", "", ""], "schema_2", "table_3", 0),
    (["3", "schema", "table", "_"], "schema_2", "table_3", 3 << 59 | 2 << 52 | 3 << 44),   # separator
    (["3", "s", "t", "-"], "s-12", "t-034", 3 << 59 | 12 << 52 | 34 << 44),
    (["3", "schema", "table"], "schema", "table", 3 << 59),                  # name == prefix: 0
    (["1", "schema_", "table_"], "SCHEMA_2", "Table_3", 1 << 59 | 2 << 52 | 3 << 44),
]


@pytest.mark.parametrize("args,schema,table,expected", LAYOUT)
def test_partition_id_layout(args, schema, table, expected):
    assert partition_or_value(args, schema, table) == expected


def test_map_row_partition_id():
    m = ColumnMapper([ColumnMappingRule("schema_*", "table_*", "id", "id", "partition id", ["1", "schema_", "table_"])])
    plan = m.plan("schema_2", "table_3", ["id", "name"])
    row = [123, "x"]
    assert plan.map_row(row) == [1 << 59 | 2 << 52 | 3 << 44 | 123, "x"]
    assert row == [123, "x"]                                 # a copy, not the input
    assert plan.map_row(["123", "x"]) == [str(1 << 59 | 2 << 52 | 3 << 44 | 123), "x"]
    assert plan.map_row([None, "x"]) == [None, "x"]
    assert plan.map_row([Decimal(7), "x"])[0] == 1 << 59 | 2 << 52 | 3 << 44 | 7
    assert plan.map_row([(1 << 44) - 1, "x"])[0] == 1 << 59 | 2 << 52 | 3 << 44 | (1 << 44) - 1
    assert plan.transforms == [PartitionId("id", 0, 1 << 59 | 2 << 52 | 3 << 44, 44, "id", 0)]
    assert plan is m.plan("schema_2", "table_3", ["id", "name"])     # planned once per column list


# DM's maxOriginID stays 2**44 whatever field is dropped (pkg/column-mapping: only SetPartitionRule,
# which DM never calls, moves it): a dropped field leaves its bits unused
@pytest.mark.parametrize("args,bits", [(["1", "s_", "t_"], 44), (["", "s_", "t_"], 44), (["1", "", "t_"], 44),
                                       (["1", "s_", ""], 44), (["", "", "t_"], 44), (["", "", ""], 44)])
def test_dropped_fields_keep_the_id_below_2_44(args, bits):
    plan = ColumnMapper([ColumnMappingRule("s_*", "t_*", "id", "id", "partition id", args)]).plan("s_1", "t_2", ["id"])
    assert plan.transforms[0].id_bits == bits
    top = (1 << bits) - 1
    assert plan.map_row([top])[0] == plan.transforms[0].or_value | top
    assert plan.transforms[0].or_value & top == 0                  # the fields never overlap the id
    with pytest.raises(ShardflowError, match=rf"out of range \[0, 2\*\*{bits}\)"):
        plan.map_row([1 << bits])


def test_partition_id_reads_source_writes_target():
    m = ColumnMapper([ColumnMappingRule("s", "t", "id", "gid", "partition id", ["2", "", ""])])
    plan = m.plan("s", "t", ["id", "GID"])
    assert plan.transforms == [PartitionId("GID", 1, 2 << 59, 44, "id", 0)]     # DM: ids below 2**44 always
    assert plan.map_row([5, None]) == [5, 2 << 59 | 5]


@pytest.mark.parametrize("value,match", [
    (1 << 44, r"value 17592186044416 is out of range \[0, 2\*\*44\)"),
    (-1, r"value -1 is out of range"),
    ("12abc", "is not an integer"),
    (1.5, "is not an integer"),
    (True, "is not an integer"),
])
def test_partition_id_value_errors_name_table_and_column(value, match):
    plan = ColumnMapper([ColumnMappingRule("s_*", "t_*", "id", "id", "partition id", ["1", "s_", "t_"])]).plan("s_1", "t_1", ["id"])
    with pytest.raises(ShardflowError, match=match) as e:
        plan.map_row([value])
    assert "`s_1`.`t_1`.`id`" in str(e.value)


@pytest.mark.parametrize("args,schema,table,match", [
    (["1", "schema_", "table_"], "schema_128", "table_1", "schema suffix 128 of 'schema_128' does not fit in 7 bits"),
    (["1", "schema_", "table_"], "schema_1", "table_256", "table suffix 256 of 'table_256' does not fit in 8 bits"),
    (["1", "schema_", "table_"], "schema_x", "table_1", "schema 'schema_x' is not 'schema_' followed by a number"),
    (["1", "schema_", "table_"], "schema_1", "tbl_1", "table 'tbl_1' is not 'table_' followed by a number"),
    (["1", "schema", "table"], "schema_1", "table1", "schema 'schema_1' is not 'schema' followed by a number"),
])
def test_partition_id_name_errors(args, schema, table, match):
    with pytest.raises(ShardflowError, match=match):
        partition_or_value(args, schema, table)


def test_case_sensitive_prefix():
    with pytest.raises(ShardflowError):
        partition_or_value(["1", "schema_", ""], "SCHEMA_1", "t", case_sensitive=True)


def test_add_prefix_and_suffix():
    m = ColumnMapper([ColumnMappingRule("s", "t1", "", "name", "add prefix", ["p_"]),
                      ColumnMappingRule("s", "t2", "", "name", "add suffix", ["_s"])])
    p1 = m.plan("s", "t1", ["id", "name"])
    assert p1.transforms == [AddPrefix("name", 1, "p_")]
    assert p1.map_row([1, "abc"]) == [1, "p_abc"]
    assert p1.map_row([1, None]) == [1, None]
    p2 = m.plan("s", "t2", ["name"])
    assert p2.transforms == [AddSuffix("name", 0, "_s")]
    assert p2.map_row(["abc"]) == ["abc_s"]
    with pytest.raises(ShardflowError, match="is not a string"):
        p2.map_row([5])


def test_rule_selection():
    m = ColumnMapper([ColumnMappingRule("s_*", "", "", "c", "add prefix", ["schema:"]),
                      ColumnMappingRule("s_*", "t_*", "", "c", "add prefix", ["table:"])])
    assert m.plan("s_1", "t_1", ["c"]).map_row(["v"]) == ["table:v"]     # table level wins
    assert m.plan("s_1", "x", ["c"]).map_row(["v"]) == ["schema:v"]
    assert m.plan("other", "t_1", ["c"]) is None


def test_ambiguous_rules_are_an_error():
    m = ColumnMapper([ColumnMappingRule("s_*", "t_*", "", "c", "add prefix", ["a"]),
                      ColumnMappingRule("s_1", "t_?", "", "c", "add prefix", ["b"])])
    with pytest.raises(ShardflowError, match="matches 2 table-level rules"):
        m.plan("s_1", "t_1", ["c"])


def test_missing_column_is_an_error():
    m = ColumnMapper([ColumnMappingRule("s", "t", "id", "id", "partition id", ["1", "", ""])])
    with pytest.raises(ShardflowError, match="`s`.`t` has no column `id` \\(source-column\\)"):
        m.plan("s", "t", ["uid", "name"])


@pytest.mark.parametrize("rule,key", [
    (ColumnMappingRule("s", "t", "id", "id", "partition", ["1", "", ""]), "expression"),
    (ColumnMappingRule("s", "t", "id", "id", "partition id", ["1", ""]), "arguments"),
    (ColumnMappingRule("s", "t", "id", "id", "partition id", ["16", "", ""]), "arguments[0]"),
    (ColumnMappingRule("s", "t", "id", "id", "partition id", ["x", "", ""]), "arguments[0]"),
    (ColumnMappingRule("s", "t", "id", "", "partition id", ["1", "", ""]), "target-column"),
    (ColumnMappingRule("s", "t", "", "c", "add prefix", []), "arguments"),
    (ColumnMappingRule("", "t", "", "c", "add prefix", ["x"]), "schema-pattern"),
])
def test_invalid_rules(rule, key):
    with pytest.raises(RuleError) as e:
        ColumnMapper([rule])
    assert e.value.key == key
