"""``table_schema``: every allowed table can be replicated row by row.

A table needs a primary key or a unique key on NOT NULL columns: safe mode turns updates
into DELETE + REPLACE by key, and the full phase splits a table into key ranges. Without
one, every row event is applied by comparing all columns (slow, and duplicate rows can't
be told apart). Tables or columns in a character set the target may not know (anything
but utf8/utf8mb4/latin1/ascii/binary) are flagged too. Both are warnings, one per table.
A route or column-mapping rule that cannot apply to a table (a mapping naming a column
the table lacks) fails: the full phase would stop on it. An expression filter naming a column
the table lacks is a warning: as in DM, that expression is false and filters no row.

A target table that a route's extract-table / extract-schema / extract-source writes into and that
the user created beforehand must have those extend columns (DM: "does not exist in downstream
table"): rows of different shards with the same key are told apart only by them.

A target table the user created beforehand whose text column has another character set than
an upstream column routed into it is flagged (``target_charsets``): where the target's charset
lacks characters of the upstream's (GBK's user-defined area in utf8mb4, most of utf8mb4 in
latin1), such a value is refused when it comes (the full load's chunk fails naming it; the sync
pauses on the downstream's refusal), never written changed. So is a column whose type cannot hold
every value of the upstream's (``target_types``: a shorter VARCHAR, a smaller integer, fewer
DECIMAL digits, fewer fractional seconds, a missing ENUM member; check/type_fit.py).

A user sees only the tables it holds some privilege on, so "no table" may also mean
"no privilege": the warning says so.
"""

from __future__ import annotations

from dm_core.check.context import failed, item, passed, undetermined, warned
from dm_core.check.probe import ServerFacts
from dm_core.check.type_fit import narrower

SUPPORTED_CHARSETS = frozenset({"utf8", "utf8mb3", "utf8mb4", "latin1", "ascii", "binary"})


@item("table_schema", scope="source")
def table_schema(ctx, src: ServerFacts):
    if src.tables is None and "tables" in src.errors:   # the server answered the listing with an error
        return [failed(f"cannot list the tables the block-allow list selects: {src.errors['tables']}",
                       "the full phase and the sync need this list: fix what the error names (server, "
                       "connection, privileges on information_schema), then check again")]
    if src.tables is None:
        return [undetermined(src, "the allowed tables", "tables")]
    if not src.tables:
        return [warned(f"the block-allow list selects no table visible to user '{src.user}' on this source",
                       "check block-allow-list in the task file and the user's privileges (a user sees only "
                       "tables it has privileges on), or create the tables first")]
    out = []
    for t in src.tables:
        if t.rule_error:
            out.append(failed(f"the task's rules do not fit table {t.name}: {t.rule_error}",
                              "fix the route / column-mapping rules matching this table", table=t.name))
        for name, key, col in t.expr_unknown:
            out.append(warned(f"expression-filter {name!r}: {key} uses column `{col}`, which table {t.name} does "
                              "not have: as in DM, the expression is false there and skips no row",
                              f"fix the expression, or the filter's schema/table, or add column `{col}`",
                              table=t.name))
        if not t.key:
            out.append(warned(f"table {t.name} has no primary key and no NOT NULL unique key: rows are "
                              "matched on every column, which is slow and cannot tell duplicate rows apart",
                              f"ALTER TABLE {t.name} ADD PRIMARY KEY (...)", table=t.name))
        odd = sorted({cs for cs in [t.charset] + [c.charset for c in t.columns]
                      if cs and cs.lower() not in SUPPORTED_CHARSETS})
        if odd:
            out.append(warned(f"table {t.name} uses character set {', '.join(odd)}, which the target may not "
                              "support (supported: utf8, utf8mb4, latin1, ascii, binary)",
                              f"ALTER TABLE {t.name} CONVERT TO CHARACTER SET utf8mb4", table=t.name))
    return out or [passed(f"{len(src.tables)} allowed table(s), each with a primary or NOT NULL unique key")]


# (upstream charset, target charset) pairs no value can lose characters in: the target's
# charset holds every character of the upstream's
_UNICODE = {"utf8mb4", "utf8mb3", "utf8", "utf16", "utf16le", "utf32", "ucs2"}
_WIDER = {"ascii": _UNICODE | {"latin1", "ascii"}, "latin1": {"utf8mb4", "utf8mb3", "utf8", "utf16", "utf32"},
          "utf8mb3": {"utf8mb4", "utf16", "utf32"}, "utf8": {"utf8mb4", "utf16", "utf32"}, "ucs2": {"utf8mb4"}}


def may_lose(up: str, down: str) -> bool:
    """Whether text in charset ``up`` may hold characters charset ``down`` lacks.

    >>> may_lose("latin1", "utf8mb4"), may_lose("gbk", "utf8mb4"), may_lose("utf8mb4", "latin1")
    (False, True, True)
    """
    up, down = up.lower(), down.lower()
    return up != down and down not in _WIDER.get(up, ())


def _existing_targets(ctx) -> list[tuple[object, list[tuple[object, object, object]]]]:
    """Each target table the user made beforehand (the full phase creates the others from the
    upstream's definitions), with its (upstream table, upstream column, target column) pairs."""
    down = {(t.schema.lower(), t.table.lower()): t for t in ctx.target.tables or ()}
    out = []
    for key, members in sorted(ctx.targets.items()):
        tbl = down.get(key)
        if tbl is None:
            continue
        have = {c.name.lower(): c for c in tbl.columns}
        out.append((tbl, [(t, c, have[c.name.lower()]) for t in members for c in t.columns
                          if c.name.lower() in have]))
    return out


@item("table_schema", scope="task")
def target_charsets(ctx):
    targets = _existing_targets(ctx)
    out = []
    for tbl, pairs in targets:
        seen = set()
        for t, c, d in pairs:
            if not c.charset or not d.charset or not may_lose(c.charset, d.charset):
                continue
            if (c.name.lower(), c.charset.lower()) in seen:
                continue
            seen.add((c.name.lower(), c.charset.lower()))
            out.append(warned(f"column {c.name} of {t.name} is {c.charset} and its target {tbl.name}.{d.name} "
                              f"is {d.charset}, which lacks some of its characters: a value with one is refused "
                              "when it comes (the full load's chunk fails, the sync pauses), never written "
                              "changed", f"ALTER TABLE {tbl.name} MODIFY {d.name} ... CHARACTER SET {c.charset}, "
                              "or drop the target table and let the full phase create it", table=tbl.name))
    if not targets:
        return []   # the full phase creates every target with the upstream's charsets
    return out or [passed(f"{len(targets)} existing target table(s): their text columns hold what the upstream's do")]


@item("table_schema", scope="task")
def target_types(ctx):
    targets = _existing_targets(ctx)
    out, seen = [], set()
    for tbl, pairs in targets:
        for t, c, d in pairs:
            if c.name.lower() in {m.lower() for m in t.mapped_columns}:
                continue   # a mapped column's values are changed by the rule, on purpose
            why = narrower(c.norm_type, d.norm_type)
            if why is None or (tbl.name, d.name.lower(), c.norm_type) in seen:
                continue
            seen.add((tbl.name, d.name.lower(), c.norm_type))
            out.append(warned(f"column {c.name} of {t.name} is {c.norm_type} and its target {tbl.name}.{d.name} "
                              f"is {d.norm_type}: {why}. A value that does not fit is refused when it comes "
                              "(the full load's chunk fails naming the row, the sync pauses), never written "
                              "changed", f"ALTER TABLE {tbl.name} MODIFY {d.name} {c.norm_type} ..., or drop the "
                              "target table and let the full phase create it", table=tbl.name))
    if not targets:
        return []
    return out or [passed(f"{len(targets)} existing target table(s): their columns hold every upstream value")]


@item("table_schema", scope="task")
def extended_columns(ctx):
    wanted: dict[tuple[str, str], set[str]] = {}
    for key, members in ctx.targets.items():
        for t in members:
            wanted.setdefault(key, set()).update(t.extract_columns)
    wanted = {k: v for k, v in wanted.items() if v}
    if not wanted:
        return []
    down = {(t.schema.lower(), t.table.lower()): t for t in ctx.target.tables or ()}
    out = []
    for key, cols in sorted(wanted.items()):
        tbl = down.get(key)
        if tbl is None:
            continue  # the full phase creates it, extend columns included
        have = {c.name.lower() for c in tbl.columns}
        missing = sorted(c for c in cols if c.lower() not in have)
        if missing:
            out.append(failed(f"extended column(s) {', '.join(missing)} of the routes do not exist in downstream "
                              f"table {tbl.name}", "add them to that table (and to its primary key, so rows of "
                              "different shards stay apart), or drop the table and let the full phase create it",
                              table=tbl.name))
    return out or [passed(f"{len(wanted)} target table(s) with extend columns: those that exist have them")]
