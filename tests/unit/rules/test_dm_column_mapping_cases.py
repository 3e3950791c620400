"""tiflow pkg/column-mapping (column_test.go), its data as our own table-driven test: rule
validity, add prefix, the partition id's bit layout, its name and value errors.

DM's test also calls SetPartitionRule to try other bit widths; DM itself never calls it
(4/7/8 bits and ids below 2**44 always), so those cases are not ported.
"""

import pytest

from dm_core.errors import ShardflowError
from dm_core.rules.column_mapping import ColumnMapper, ColumnMappingRule, partition_or_value
from dm_core.rules.patterns import RuleError


# (source-column, target-column, expression, arguments), valid?
RULES = [
    (("id", "id", "Error", []), False),
    (("id", "", "Error", []), False),
    (("id", "id", "add prefix", []), False),
    (("id", "id", "add prefix", ["1"]), True),
    (("id", "id", "partition id", ["1"]), False),
    (("id", "id", "partition id", ["1", "test_", "t_"]), True),
    (("", "id", "partition id", ["1", "test_", "t_"]), True),          # DM reads the target column
]


@pytest.mark.parametrize("spec,valid", RULES)
def test_rule_validity(spec, valid):
    rule = ColumnMappingRule("test*", "abc*", *spec, create_table_query="xxx")
    if valid:
        ColumnMapper([rule])
    else:
        with pytest.raises(RuleError):
            ColumnMapper([rule])


def test_add_prefix():
    m = ColumnMapper([ColumnMappingRule("Test*", "xxx*", "", "id", "add prefix", ["instance_id:"], "xx")])
    assert m.plan("test", "xxx", ["age", "id"]).map_row([1, "1"]) == [1, "instance_id:1"]
    with pytest.raises(ShardflowError):         # the target column is not there
        m.plan("test", "xxx", ["name"])
    assert m.plan("abc", "xxx", ["id", "age"]) is None


def test_add_prefix_case_sensitive():
    m = ColumnMapper([ColumnMappingRule("Test*", "xxx*", "", "id", "add prefix", ["instance_id:"], "xx")],
                     case_sensitive=True)
    assert m.plan("test", "xxx", ["age", "id"]) is None


def test_partition_id_plan():
    m = ColumnMapper([ColumnMappingRule("test*", "xxx*", "", "id", "partition id", ["8", "test_", "xxx_"], "xx")])
    assert m.plan("test_2", "t_1", ["id", "name"]) is None
    t = m.plan("test_2", "xxx_1", ["id", "name"]).transforms[0]
    assert (t.column, t.index, t.or_value) == ("id", 0, 8 << 59 | 2 << 52 | 1 << 44)


# arguments, schema, table, (instance, schema, table) bits, or the error's words
LAYOUT = [
    (["test", "t", ""], "test_1", "t_1", "instance id"),
    (["2", "test", "t", "_"], "test_1", "t_1", (2 << 59, 1 << 52, 1 << 44)),
    (["2", "test", "t", "_"], "test", "t_3", (2 << 59, 0, 3 << 44)),
    (["2", "test", "t", "_"], "test_5", "t", (2 << 59, 5 << 52, 0)),
    (["2", "test", "t", "_"], "unrelated", "t_6", "'unrelated' is not 'test_'"),
    (["2", "test", "t", "_"], "test", "x", "'x' is not 't_'"),
    (["2", "test", "t", "_"], "test_0", "t_0xa", "'t_0xa' is not 't_' followed by a number"),
    (["2", "test", "t", "_"], "test_0", "t_", "'t_' is not 't_' followed by a number"),
    (["2", "test", "t", "_"], "testx", "t_3", "'testx' is not 'test_'"),
    (["", "test_", "t_", ""], "test_1", "t_1", (0, 1 << 56, 1 << 48)),       # no instance id: the rest move up
    (["2", "", "t_", ""], "test_1", "t_1", (2 << 59, 0, 1 << 51)),
    (["2", "test_", "", ""], "test_1", "t_1", (2 << 59, 1 << 52, 0)),
]


@pytest.mark.parametrize("args,schema,table,expected", LAYOUT)
def test_partition_id_layout(args, schema, table, expected):
    if isinstance(expected, str):
        with pytest.raises(ShardflowError, match=expected):
            partition_or_value(args, schema, table)
    else:
        assert partition_or_value(args, schema, table) == sum(expected)


# value of the id column, the mapped value or the error's words
VALUES = [
    ("ha", "not an integer"),
    (1 << 44, "out of range"),
    (1, 2 << 59 | 1 << 52 | 1 << 44 | 1),
]


@pytest.mark.parametrize("value,expected", VALUES)
def test_partition_id_values(value, expected):
    plan = ColumnMapper([ColumnMappingRule("test_*", "t_*", "", "id", "partition id", ["2", "test_", "t_"])]) \
        .plan("test_1", "t_1", ["name", "id"])
    if isinstance(expected, str):
        with pytest.raises(ShardflowError, match=expected):
            plan.map_row(["ha", value])
    else:
        assert plan.map_row(["ha", value]) == ["ha", expected]


def test_partition_id_keeps_a_string_a_string():
    plan = ColumnMapper([ColumnMappingRule("test_*", "t_*", "", "id", "partition id", ["", "test_", "t_"])]) \
        .plan("test_1", "t_1", ["name", "id"])
    assert plan.map_row(["ha", "123"]) == ["ha", str(1 << 56 | 1 << 48 | 123)]


@pytest.mark.parametrize("args", [["", "test_", "t_"], ["2", "", "t_"], ["", "", ""]])
def test_largest_id_stays_below_2_44_when_a_field_is_dropped(args):
    plan = ColumnMapper([ColumnMappingRule("test_*", "t_*", "", "id", "partition id", args)]).plan("test_1", "t_1", ["id"])
    assert plan.map_row([(1 << 44) - 1])[0] & ((1 << 44) - 1) == (1 << 44) - 1
    with pytest.raises(ShardflowError, match=r"\[0, 2\*\*44\)"):
        plan.map_row([1 << 44])
