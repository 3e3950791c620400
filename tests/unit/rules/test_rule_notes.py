"""check-task's warnings for rules DM reads otherwise (config/rule_notes.py), and the precheck's
warning for an expression filter naming a column the table lacks."""

from types import SimpleNamespace

from dm_core.check.context import _apply_rules
from dm_core.check.probe import Column, TableInfo
from dm_core.check.table_schema import table_schema
from dm_core.config.task import parse_task

HEAD = """
name: t
task-mode: incremental
case-sensitive: {cs}
target-database: {{host: h, port: 4000, user: root, password: ""}}
mysql-instances:
  - source-id: s1
    meta: {{binlog-name: mysql-bin.000001, binlog-pos: 4}}
"""


def _warnings(body: str, cs: str = "false") -> dict[str, str]:
    task = parse_task(HEAD.format(cs=cs) + body)
    return {w.key: w.message for w in task.warnings}


def test_tilde_in_binlog_filter_and_column_mapping():
    got = _warnings("""    filter-rules: [f]
    column-mapping-rules: [c]
filters:
  f: {schema-pattern: "~^s", events: [insert], action: Ignore}
column-mappings:
  c: {schema-pattern: "s", table-pattern: "~^t", target-column: id, expression: "add prefix", arguments: [x]}
""")
    assert "read `~` as a character" in got["filters.f.schema-pattern"]
    assert "'~^t'" in got["column-mappings.c.table-pattern"]


def test_partition_id_source_column_other_than_target():
    got = _warnings("""    column-mapping-rules: [c, d]
column-mappings:
  c: {schema-pattern: "s", table-pattern: "t", source-column: id, target-column: gid, expression: "partition id", arguments: ["1", "", ""]}
  d: {schema-pattern: "s", table-pattern: "u", source-column: "", target-column: gid, expression: "partition id", arguments: ["1", "", ""]}
""")
    assert list(got) == ["column-mappings.c.source-column"]
    assert "DM reads the target column `gid`" in got["column-mappings.c.source-column"]


BA = """    block-allow-list: ba
    route-rules: [r]
block-allow-list:
  ba:
    do-dbs: ["~^\\\\D"]
    do-tables:
      - {db-name: "~^a", tbl-name: "x*"}
      - {db-name: "~^b", tbl-name: "y"}
routes:
  r: {schema-pattern: "~^\\\\W", target-schema: d}
"""


def test_lower_cased_escapes_only_when_case_insensitive():
    got = _warnings(BA)
    assert "\\D becomes \\d" in got["block-allow-list.ba.do-dbs[0]"]
    assert "\\W becomes \\w" in got["routes.r.schema-pattern"]
    assert "'~^a' with tbl-name 'y'" in got["block-allow-list.ba.do-tables"]
    assert list(_warnings(BA, cs="true")) == ["block-allow-list.ba.do-tables"]


def test_numeric_expression_filter():
    got = _warnings("""    expression-filters: [n, b]
expression-filter:
  n: {schema: s, table: t, insert-value-expr: "(c & 4)"}
  b: {schema: s, table: t, delete-value-expr: "c & 4 = 4"}
""")
    assert list(got) == ["expression-filter.n.insert-value-expr"]
    assert "exactly 1" in got["expression-filter.n.insert-value-expr"]


def test_precheck_warns_of_an_expression_filter_column_the_table_lacks():
    task = parse_task(HEAD.format(cs="false") + """    expression-filters: [e]
expression-filter:
  e: {schema: s, table: t, insert-value-expr: "gone > 1"}
""")
    t = TableInfo("s1", "s", "t", "utf8mb4", [Column("id", "int", False, False, None)], {"PRIMARY": (True, ["id"])})
    _apply_rules(task.rules_for("s1"), t)
    assert t.expr_unknown == [("e", "insert-value-expr", "gone")] and not t.rule_error
    out = table_schema(None, SimpleNamespace(tables=[t], errors={}, user="u"))
    assert [r.state for r in out] == ["warn"] and "`gone`" in out[0].message and "'e'" in out[0].message
