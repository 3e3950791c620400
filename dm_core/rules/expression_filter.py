"""Expression filters: skip row changes whose values satisfy a SQL expression.

DM's semantics (``expression-filter`` in the task file, ``dm/syncer/expr_filter_group.go``):

* a rule names one upstream ``schema`` and ``table`` exactly (no wildcards, no regexp) and
  has one kind of expression: ``insert-value-expr``, or ``update-old-value-expr`` and/or
  ``update-new-value-expr``, or ``delete-value-expr``;
* an INSERT is skipped when any insert rule of its table is true on the new row; a DELETE
  likewise on the old row; an UPDATE when, for some rule, the old-value expression is true
  on the old row *and* the new-value expression on the new row -- a rule that sets only one
  of the two counts the other as true;
* a NULL result is not true: the row is kept.

Expressions are parsed once when the task is loaded (syntax errors are config problems) and
bound to a table's columns once per table schema (``compile``). An expression naming a column
the table does not have is constant false, as in DM (its ``getSimpleExprOfTable`` swaps in a
zero and logs a warning): it skips no row; the table's ``unknown_columns`` names the filter and
the column, for the log and for check-task. As in DM, the rules filter binlog rows only: the full phase copies every row
(check-task warns for an ``insert-value-expr`` in a task with a full phase); the validation
counts what they explain as filtered (dm_core/validate/filters.py).

    >>> ef = ExpressionFilter([ExprFilterRule("even_c", "expr_filter", "tbl", insert_value_expr="c % 2 = 0"),
    ...                        ExprFilterRule("big", "expr_filter", "tbl", update_new_value_expr="c > 100")])
    >>> t = ef.compile("expr_filter", "tbl", ["id", "c"])
    >>> t.skip_insert({"id": 1, "c": 4}), t.skip_insert({"id": 1, "c": 3}), t.skip_insert({"id": 1, "c": None})
    (True, False, False)
    >>> t.skip_update({"id": 1, "c": 1}, {"id": 1, "c": 101}), t.skip_delete({"id": 1, "c": 4})
    (True, False)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlglot import exp

from dm_core.errors import ErrorCode
from dm_core.rules.patterns import RuleError
from dm_core.rules.sql_eval import Fn, UnsupportedExpression, columns_of, compile_expr, parse_condition, truthy

log = logging.getLogger("shardflow.rules")

KEYS = ("insert-value-expr", "update-old-value-expr", "update-new-value-expr", "delete-value-expr")


@dataclass(frozen=True)
class ExprFilterRule:
    """One entry of ``expression-filter``; ``name`` is its key there."""

    name: str = field(default="", metadata={"yaml": None})
    schema: str = ""
    table: str = ""
    insert_value_expr: str = ""
    update_old_value_expr: str = ""
    update_new_value_expr: str = ""
    delete_value_expr: str = ""


def _parsed(rule: ExprFilterRule) -> dict[str, exp.Expression]:
    if not rule.schema or not rule.table:
        raise RuleError("schema" if not rule.schema else "table", "must name the upstream schema and table")
    texts = {k: getattr(rule, k.replace("-", "_")) for k in KEYS}
    kinds = [k for k, on in (("insert", texts[KEYS[0]]), ("update", texts[KEYS[1]] or texts[KEYS[2]]),
                             ("delete", texts[KEYS[3]])) if on]
    if len(kinds) != 1:
        raise RuleError("", f"needs exactly one of insert-value-expr, update-*-value-expr, delete-value-expr "
                            f"(DM: one kind of statement per rule), has {kinds or 'none'}")
    out = {}
    for k, t in texts.items():
        if t:
            try:
                out[k] = parse_condition(t)
                compile_expr(out[k], lambda c: c)     # unsupported SQL fails here, not on a row
            except ValueError as e:
                raise RuleError(k, str(e)) from None
    return out


@dataclass
class TableExprFilter:
    """The expression filters of one table, bound to its columns."""

    schema: str
    table: str
    inserts: list[tuple[str, Fn]] = field(default_factory=list)
    updates: list[tuple[str, Fn | None, Fn | None]] = field(default_factory=list)
    deletes: list[tuple[str, Fn]] = field(default_factory=list)
    unknown_columns: list[tuple[str, str, str]] = field(default_factory=list)   # (filter, key, column)

    def skip_insert(self, row: dict) -> bool:
        return any(truthy(f(row)) for _, f in self.inserts)

    def skip_update(self, old: dict, new: dict) -> bool:
        return any((o is None or truthy(o(old))) and (n is None or truthy(n(new))) for _, o, n in self.updates)

    def skip_delete(self, row: dict) -> bool:
        return any(truthy(f(row)) for _, f in self.deletes)



class ExpressionFilter:
    """The expression-filter rules of one instance."""

    def __init__(self, rules: list[ExprFilterRule], case_sensitive: bool = False):
        self._cs = case_sensitive
        self._rules = [(r, _parsed(r)) for r in rules]
        self._cache: dict[tuple, TableExprFilter | None] = {}

    def _same(self, a: str, b: str) -> bool:
        return a == b if self._cs else a.lower() == b.lower()

    def compile(self, schema: str, table: str, columns: list[str]) -> TableExprFilter | None:
        """The filters of ``schema``.``table`` bound to ``columns``; None when no rule names it."""
        key = (schema, table, tuple(columns))
        if key not in self._cache:
            self._cache[key] = self._compile(schema, table, columns)
        return self._cache[key]

    def _compile(self, schema, table, columns) -> TableExprFilter | None:
        mine = [(r, p) for r, p in self._rules if self._same(r.schema, schema) and self._same(r.table, table)]
        if not mine:
            return None
        real = {c.lower(): c for c in reversed(columns)}
        out = TableExprFilter(schema, table)
        for rule, parsed in mine:
            fns = {k: self._bind(rule, k, node, real, out) for k, node in parsed.items()}
            if KEYS[0] in fns:
                out.inserts.append((rule.name, fns[KEYS[0]]))
            if KEYS[1] in fns or KEYS[2] in fns:
                out.updates.append((rule.name, fns.get(KEYS[1]), fns.get(KEYS[2])))
            if KEYS[3] in fns:
                out.deletes.append((rule.name, fns[KEYS[3]]))
        return out

    @staticmethod
    def _bind(rule, key, node, real, out: TableExprFilter) -> Fn:
        missing = [c for c in columns_of(node) if c.lower() not in real]
        if missing:
            out.unknown_columns.append((rule.name, key, missing[0]))
            log.warning("expression-filter %r: %s uses column `%s`, which `%s`.`%s` does not have (it has %s): "
                        "the expression is false, as in DM, and skips no row", rule.name, key, missing[0],
                        out.schema, out.table, ", ".join(real.values()))
            return _never
        try:
            return compile_expr(node, lambda c: real[c.lower()])
        except UnsupportedExpression as e:
            raise ErrorCode.CONFIG_INVALID.error(f"expression-filter {rule.name!r}: {key}: {e}") from None


def _never(row) -> bool:
    return False
