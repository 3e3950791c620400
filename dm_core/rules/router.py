"""Table routing: which downstream schema.table an upstream table's rows and DDL go to.

DM's table-router semantics:

* a rule without ``table-pattern`` is schema level, the others table level; a table-level
  match wins over a schema-level one; a schema-only question (``table == ""``, e.g.
  CREATE DATABASE) only looks at schema-level rules;
* two matching rules at the same level is an error (DM refuses to guess);
* an empty ``target-table`` keeps the table's name (so does an unmatched table, which
  keeps schema and table);
* ``extract-table`` / ``extract-schema`` / ``extract-source`` fill extra downstream columns
  with the submatches of a regular expression on the table name, the schema name or the
  source id, concatenated (``t_(.*)`` on ``t_01`` gives ``01``; no match gives ``""``).

    >>> r = TableRouter([RouteRule("s_*", "t_*", "s", "t",
    ...                            extract_table={"table-regexp": "t_(.*)", "target-column": "c_table"}),
    ...                  RouteRule("s_*", target_schema="s")])
    >>> r.route("s_1", "t_01"), r.route("s_1", "other"), r.route("s_1", ""), r.route("x", "y")
    (('s', 't'), ('s', 'other'), ('s', ''), ('x', 'y'))
    >>> r.extract_values("s_1", "t_01", "mysql-01"), r.extract_columns("s_1", "t_01")
    ({'c_table': '01'}, ['c_table'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dm_core.errors import ErrorCode
from dm_core.rules.patterns import RuleError, Selector
from dm_core.rules.re2 import compile_go

# YAML key of each extractor -> (key of its regular expression, what it reads)
EXTRACTORS = {"extract-table": ("table-regexp", "table"), "extract-schema": ("schema-regexp", "schema"),
              "extract-source": ("source-regexp", "source")}


@dataclass(frozen=True)
class RouteRule:
    """One entry of ``routes``."""

    schema_pattern: str
    table_pattern: str = ""
    target_schema: str = ""
    target_table: str = ""
    extract_table: dict[str, str] | None = None    # {table-regexp, target-column}
    extract_schema: dict[str, str] | None = None   # {schema-regexp, target-column}
    extract_source: dict[str, str] | None = None   # {source-regexp, target-column}


@dataclass(frozen=True)
class _Extract:
    column: str
    reads: str          # "table" | "schema" | "source"
    regexp: re.Pattern


def _extractors(rule: RouteRule) -> list[_Extract]:
    out = []
    for key, (rkey, reads) in EXTRACTORS.items():
        spec = getattr(rule, key.replace("-", "_"))
        if spec is None:
            continue
        unknown = set(spec) - {rkey, "target-column"}
        if unknown:
            raise RuleError(f"{key}.{sorted(unknown)[0]}", f"unknown key; {key} takes {rkey} and target-column")
        if not spec.get(rkey) or not spec.get("target-column"):
            raise RuleError(key, f"needs both {rkey} and target-column")
        try:
            rx = compile_go(spec[rkey])
        except ValueError as e:
            raise RuleError(f"{key}.{rkey}", f"invalid regular expression {spec[rkey]!r}: {e}",
                            "rewrite it in Go's syntax (RE2), as DM compiles it") from None
        out.append(_Extract(spec["target-column"], reads, rx))
    return out


class TableRouter:
    """The compiled route rules of one instance."""

    def __init__(self, rules: list[RouteRule], case_sensitive: bool = False):
        for r in rules:
            if not r.target_schema:
                raise RuleError("target-schema", "must not be empty")
        self._extract = {id(r): _extractors(r) for r in rules}
        self._sel = Selector([(r.schema_pattern, r.table_pattern, r) for r in rules], case_sensitive)

    def _rule(self, schema: str, table: str) -> RouteRule | None:
        tables, schemas = self._sel.match(schema, table)
        level, found = ("table", tables) if table and tables else ("schema", schemas)
        if len(found) > 1:
            a, b = found[0], found[1]
            raise ErrorCode.CONFIG_INVALID.error(
                f"`{schema}`.`{table}` matches {len(found)} {level}-level route rules, DM allows one: "
                f"({a.schema_pattern!r}, {a.table_pattern!r}) and ({b.schema_pattern!r}, {b.table_pattern!r})",
                workaround="Make the routes' schema-pattern/table-pattern disjoint, then restart the task.")
        return found[0] if found else None

    def route(self, schema: str, table: str) -> tuple[str, str]:
        """The downstream (schema, table) of an upstream one; unchanged when no rule matches."""
        rule = self._rule(schema, table)
        if rule is None:
            return schema, table
        return rule.target_schema or schema, rule.target_table or table

    def extract_columns(self, schema: str, table: str) -> list[str]:
        """Downstream columns the matched rule's extractors fill (the user creates them)."""
        rule = self._rule(schema, table)
        return [e.column for e in self._extract[id(rule)]] if rule else []

    def extract_values(self, schema: str, table: str, source_id: str) -> dict[str, str]:
        """target column -> value for this table's rows, in DM's order (table, schema, source)."""
        rule = self._rule(schema, table)
        if rule is None:
            return {}
        names = {"table": table, "schema": schema, "source": source_id}
        out = {}
        for e in self._extract[id(rule)]:
            m = e.regexp.search(names[e.reads])
            out[e.column] = "".join(g or "" for g in m.groups()) if m else ""
        return out
