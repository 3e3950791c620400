"""Warnings for task-file rules that DM reads differently from shardflow, each naming the rule,
the pattern and the difference (docs/compatibility.md lists them with the reason).

Everything here is accepted: where shardflow refuses what DM refuses, the engines do it
(``dm_core/rules``); where DM's reading is a bug a user should not rely on, or where shardflow
goes further than DM, the file loads and check-task says how the two differ.
"""

from __future__ import annotations

from sqlglot import exp

from dm_core.config.problems import Problems, join
from dm_core.rules.re2 import lowered_changes

# top-level expression nodes whose value is a number, not a truth value: DM skips the row only
# when it is exactly 1, shardflow when it is non-zero
_NUMERIC = (exp.Column, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.BitwiseAnd,
            exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseLeftShift, exp.BitwiseRightShift, exp.BitwiseNot)


def review(maps: dict, case_sensitive: bool, problems: Problems) -> None:
    """Warn about every rule of the decoded top-level ``maps`` that DM reads otherwise."""
    for name, rule in maps.get("filters", {}).items():
        literal_tilde(join("filters", name), rule, "binlog filter", problems)
    for name, rule in maps.get("column-mappings", {}).items():
        path = join("column-mappings", name)
        literal_tilde(path, rule, "column-mapping", problems)
        _source_column(path, rule, problems)
    for key in ("block-allow-list", "black-white-list"):
        for name, rule in maps.get(key, {}).items():
            _block_allow(join(key, name), rule, case_sensitive, problems)
    if not case_sensitive:
        for name, rule in maps.get("routes", {}).items():
            for k, text in (("schema-pattern", rule.schema_pattern), ("table-pattern", rule.table_pattern)):
                _lowered(join(join("routes", name), k), text, problems)
    for name, rule in maps.get("expression-filter", {}).items():
        _numeric_expression(join("expression-filter", name), rule, problems)


def literal_tilde(path: str, rule, what: str, problems: Problems) -> None:
    for k, text in (("schema-pattern", rule.schema_pattern), ("table-pattern", rule.table_pattern)):
        if text and text.startswith("~"):
            problems.warn(join(path, k), f"{text!r}: DM's {what} rules take wildcards only and read `~` as a "
                          "character (they would match a name starting with `~`); shardflow reads a regular "
                          "expression here", "keep it if the task only runs on shardflow, else use wildcards")


def _source_column(path: str, rule, problems: Problems) -> None:
    src, dst = rule.source_column, rule.target_column
    if rule.expression == "partition id" and src and dst and src.lower() != dst.lower():
        problems.warn(join(path, "source-column"), f"partition id reads `{src}` and writes `{dst}` here; DM reads "
                      f"the target column `{dst}` whatever source-column says",
                      f"to do as DM, set source-column to `{dst}` (or leave it empty)")


def _lowered(path: str, text: str, problems: Problems) -> None:
    if not text or not text.startswith("~"):
        return
    changes = lowered_changes(text[1:])
    if changes:
        problems.warn(path, f"{text!r}: with case-sensitive false DM lower-cases the whole regular expression before "
                      f"compiling it, so there {'; '.join(changes)}; shardflow reads it as written, ignoring case",
                      "spell the escape so that lower-casing keeps it (e.g. [^0-9] for \\D), or set case-sensitive: true")


def _block_allow(path: str, rule, case_sensitive: bool, problems: Problems) -> None:
    if not case_sensitive:
        for key in ("do-dbs", "ignore-dbs"):
            for i, text in enumerate(getattr(rule, key.replace("-", "_"))):
                _lowered(join(path, f"{key}[{i}]"), text, problems)
        for key in ("do-tables", "ignore-tables"):
            for i, t in enumerate(getattr(rule, key.replace("-", "_"))):
                _lowered(join(path, f"{key}[{i}].db-name"), t.db_name, problems)
                _lowered(join(path, f"{key}[{i}].tbl-name"), t.tbl_name, problems)
    for key in ("do-tables", "ignore-tables"):
        _crossed_pairs(join(path, key), getattr(rule, key.replace("-", "_")), problems)


def _crossed_pairs(path: str, refs, problems: Problems) -> None:
    """DM's filter keeps the tbl-name wildcards of entries whose db-name is a regular expression in
    one trie, and takes any of them once any such db-name matched: entries are not kept in pairs."""
    mixed = [(i, t) for i, t in enumerate(refs) if t.db_name.startswith("~") and not t.tbl_name.startswith("~")]
    pairs = {(t.db_name, t.tbl_name) for _, t in mixed}
    extra = sorted({(a.db_name, b.tbl_name) for _, a in mixed for _, b in mixed} - pairs)
    if extra:
        db, tbl = extra[0]
        problems.warn(path, f"entries {', '.join(str(i) for i, _ in mixed)} pair a regular-expression db-name with a "
                      f"wildcard tbl-name; DM's filter mixes such entries up and also selects e.g. db-name {db!r} "
                      f"with tbl-name {tbl!r} (a bug in DM); shardflow keeps each entry's own pair",
                      "write the tbl-name of those entries as ~regular expressions, or the db-names as wildcards")


def _numeric_expression(path: str, rule, problems: Problems) -> None:
    from dm_core.rules.sql_eval import parse_condition

    for key in ("insert-value-expr", "update-old-value-expr", "update-new-value-expr", "delete-value-expr"):
        text = getattr(rule, key.replace("-", "_"))
        if not text:
            continue
        try:
            node = parse_condition(text)
        except ValueError:
            continue        # the engine reports it
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, _NUMERIC) or (isinstance(node, exp.Literal) and not node.is_string):
            problems.warn(join(path, key), f"{text!r} is a number, not a condition: DM skips a row only when it is "
                          "exactly 1, shardflow whenever it is not 0", f"write a comparison, e.g. ({text}) = 1 as DM "
                          f"reads it, or ({text}) <> 0")
