"""Which differences the task's own filters explain, so validation does not report them.

A task's filters make the downstream differ from the upstream union on purpose, and what
they dropped depends on history a snapshot comparison cannot see (a row inserted before the
full load is downstream even when later inserts of its table are ignored). So instead of
guessing the expected downstream, each row carries flags (dm_core/validate/rows.py) saying
which kind of difference a filter may have caused, and a difference of that kind on a
flagged row is counted as *filtered*, not reported:

===================================  =========================================================
filter                               explains
===================================  =========================================================
binlog filter ignores ``insert``     any upstream row missing downstream
binlog filter ignores ``update``     any row whose values differ
binlog filter ignores ``delete`` /   any downstream row without an upstream row
``truncate table``
``insert-value-expr`` true on the    that row missing downstream
upstream row
``update-new-value-expr`` true on    that row's values differing (an update to them was skipped);
the upstream row, or                 a rule with only ``update-old-value-expr`` explains any
``update-old-value-expr`` true on    changed row of its table
the downstream row
``delete-value-expr`` true on the    that downstream row being extra
downstream row
===================================  =========================================================

Expressions are evaluated with the same engine the syncer uses (dm_core.rules.expression_filter);
on the downstream row they see the downstream's values, which differ from the upstream's only
in mapped columns. Objects here are picklable (Spark ships them to executors): expressions
compile lazily where they run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.validate.rows import MAY_BE_EXTRA, MAY_BE_MISSING, MAY_BE_STALE


def event_flags(binlog_filter, schema: str, table: str) -> tuple[int, int]:
    """(flags of every upstream row, flags of every downstream row) from binlog event filters."""
    def ignored(event: str) -> bool:
        return binlog_filter.action(schema, table, event) == "ignore"

    up = (MAY_BE_MISSING if ignored("insert") else 0) | (MAY_BE_STALE if ignored("update") else 0)
    down = (MAY_BE_EXTRA if ignored("delete") or ignored("truncate table") else 0) | \
        (MAY_BE_STALE if ignored("update") else 0)
    return up, down


@dataclass
class ExprFlags:
    """Row flags from the expression filters naming one upstream table, bound to ``columns``
    (the upstream table's for ``side='up'``, the downstream table's for ``side='down'``)."""

    rules: list                      # ExprFilterRule of the instance
    case_sensitive: bool
    schema: str
    table: str
    columns: list[str]
    side: str                        # 'up' | 'down'
    _bound: object = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        return {**self.__dict__, "_bound": None}

    def _filter(self):
        if self._bound is None:
            from dm_core.rules.expression_filter import ExpressionFilter

            self._bound = ExpressionFilter(self.rules, self.case_sensitive).compile(self.schema, self.table, self.columns) \
                or False
        return self._bound

    def __call__(self, raw: tuple) -> int:
        f = self._filter()
        if not f:
            return 0
        row = dict(zip(self.columns, raw))
        flags = 0
        if self.side == "up":
            if f.inserts and f.skip_insert(row):
                flags |= MAY_BE_MISSING
            if any(n is None or _true(n, row) for _, _, n in f.updates):
                flags |= MAY_BE_STALE
        else:
            if f.deletes and f.skip_delete(row):
                flags |= MAY_BE_EXTRA
            if any(o is not None and _true(o, row) for _, o, _ in f.updates):
                flags |= MAY_BE_STALE
        return flags


def _true(fn, row: dict) -> bool:
    from dm_core.rules.sql_eval import truthy

    try:
        return truthy(fn(row))
    except Exception:  # a value the expression cannot take (e.g. a mapped string): not explained
        return False


def expr_flags(rules, case_sensitive: bool, schema: str, table: str, columns: list[str], side: str):
    """An ExprFlags for the table, or None when no expression filter names it (compiled eagerly:
    a rule using a column the table lacks is constant false, as in DM, and warned of here)."""
    from dm_core.rules.expression_filter import ExpressionFilter

    mine = [r for r in rules if _same(r.schema, schema, case_sensitive) and _same(r.table, table, case_sensitive)]
    if not mine:
        return None
    if side == "down":  # the downstream may lack a column an upstream-only expression uses: skip that rule
        cols = {c.lower() for c in columns}
        from dm_core.rules.sql_eval import columns_of, parse_condition

        def usable(r) -> bool:
            texts = [t for t in (r.update_old_value_expr, r.delete_value_expr) if t]
            return bool(texts) and all(c.lower() in cols for t in texts for c in columns_of(parse_condition(t)))
        mine = [r for r in mine if usable(r)]
        if not mine:
            return None
    ExpressionFilter(mine, case_sensitive).compile(schema, table, columns)
    return ExprFlags(mine, case_sensitive, schema, table, list(columns), side)


def _same(a: str, b: str, cs: bool) -> bool:
    return a == b if cs else a.lower() == b.lower()


@dataclass
class AnyFlags:
    """OR of several flag functions (a downstream row is explained by any shard's filter)."""

    fns: list

    def __call__(self, raw: tuple) -> int:
        out = 0
        for f in self.fns:
            out |= f(raw)
        return out
