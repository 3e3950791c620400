"""Block & allow lists: which upstream schemas and tables a task moves at all.

The evaluation order is DM's (tidb-tools ``pkg/filter``), itself MySQL's replication rules
(``replicate-do-db`` / ``replicate-ignore-db``, then ``replicate-do-table`` /
``replicate-ignore-table``):

1. schema level: if ``do-dbs`` is set, the schema must match one of them (``ignore-dbs`` is
   then not consulted); otherwise, if ``ignore-dbs`` is set, it must match none of them;
2. table level (skipped for a schema-only question such as CREATE DATABASE):
   a table matching ``do-tables`` is moved; else one matching ``ignore-tables`` is not;
   else it is moved only if ``do-tables`` is empty.

System schemas (mysql, information_schema, performance_schema, sys, ... and DM's meta
schema) are never moved, whatever the rule says. Names are DM patterns (``patterns.py``).

    >>> rule = BAListRule(do_dbs=["~^shop_[0-9]+$"], ignore_tables=[TableRef("shop_*", "tmp_*")])
    >>> bal = BlockAllowList(rule)
    >>> bal.allow_table("shop_1", "orders"), bal.allow_table("shop_1", "tmp_x"), bal.allow_table("crm", "t")
    (True, False, False)
    >>> BlockAllowList(None).allow_table("mysql", "user"), BlockAllowList(None).allow_schema("app")
    (False, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.rules.patterns import Pattern, RuleError, compile_pattern

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys",
                            "metrics_schema", "inspection_schema"})


@dataclass(frozen=True)
class TableRef:
    """One ``- db-name: ... tbl-name: ...`` entry of do-tables / ignore-tables."""

    db_name: str
    tbl_name: str


@dataclass(frozen=True)
class BAListRule:
    """One entry of ``block-allow-list`` (legacy name ``black-white-list``)."""

    do_dbs: list[str] = field(default_factory=list)
    ignore_dbs: list[str] = field(default_factory=list)
    do_tables: list[TableRef] = field(default_factory=list)
    ignore_tables: list[TableRef] = field(default_factory=list)


class BlockAllowList:
    """The compiled rule of one instance; ``None`` allows every non-system table."""

    def __init__(self, rule: BAListRule | None, case_sensitive: bool = False, *, meta_schema: str = "dm_meta"):
        self.rule = rule
        self._system = SYSTEM_SCHEMAS | {meta_schema.lower()}
        self._cache: dict[tuple[str, str], bool] = {}
        rule = rule or BAListRule()

        def dbs(key: str, names: list[str]) -> list[Pattern]:
            for i, n in enumerate(names):
                if not n:
                    raise RuleError(f"{key}[{i}]", "must not be empty")
            return [compile_pattern(n, f"{key}[{i}]", case_sensitive) for i, n in enumerate(names)]

        def tables(key: str, refs: list[TableRef]) -> list[tuple[Pattern, Pattern]]:
            out = []
            for i, t in enumerate(refs):
                if not t.db_name or not t.tbl_name:
                    raise RuleError(f"{key}[{i}]", "needs both db-name and tbl-name")
                out.append((compile_pattern(t.db_name, f"{key}[{i}].db-name", case_sensitive),
                            compile_pattern(t.tbl_name, f"{key}[{i}].tbl-name", case_sensitive)))
            return out

        self._do_dbs = dbs("do-dbs", rule.do_dbs)
        self._ignore_dbs = dbs("ignore-dbs", rule.ignore_dbs)
        self._do_tables = tables("do-tables", rule.do_tables)
        self._ignore_tables = tables("ignore-tables", rule.ignore_tables)

    def allow_schema(self, schema: str) -> bool:
        """Whether statements on the schema itself (CREATE/DROP/ALTER DATABASE) are moved."""
        return self.allow_table(schema, "")

    def selects_schema(self, schema: str) -> bool:
        """Whether the list moves the database as a whole, its tables or not (the full phase
        creates it downstream even when it has none, as DM's dump does): allowed at schema level,
        and not selected only through ``do-tables`` of other databases.

        >>> BlockAllowList(BAListRule(do_dbs=["app"])).selects_schema("app")
        True
        >>> BlockAllowList(BAListRule(do_tables=[TableRef("app", "t")])).selects_schema("other")
        False
        """
        if not self.allow_schema(schema):
            return False
        if self._do_dbs or not self._do_tables:
            return True
        return any(sp.match(schema) for sp, _ in self._do_tables)

    def may_allow_tables_of(self, schema: str) -> bool:
        """False when no table of ``schema`` can be allowed (discover then lists none of them).

        >>> BlockAllowList(BAListRule(do_tables=[TableRef("app", "t")])).may_allow_tables_of("other")
        False
        >>> BlockAllowList(BAListRule(ignore_dbs=["tmp"])).may_allow_tables_of("app")
        True
        """
        if schema.lower() in self._system or not self._on_schema(schema):
            return False
        return not self._do_tables or any(sp.match(schema) for sp, _ in self._do_tables)

    def allow_table(self, schema: str, table: str) -> bool:
        got = self._cache.get((schema, table))
        if got is None:
            got = self._cache[(schema, table)] = (
                schema.lower() not in self._system and self._on_schema(schema) and self._on_table(schema, table))
        return got

    def _on_schema(self, schema: str) -> bool:
        if self._do_dbs:
            return any(p.match(schema) for p in self._do_dbs)
        if self._ignore_dbs:
            return not any(p.match(schema) for p in self._ignore_dbs)
        return True

    def _on_table(self, schema: str, table: str) -> bool:
        if not table:
            return True
        if any(sp.match(schema) and tp.match(table) for sp, tp in self._do_tables):
            return True
        if any(sp.match(schema) and tp.match(table) for sp, tp in self._ignore_tables):
            return False
        return not self._do_tables
