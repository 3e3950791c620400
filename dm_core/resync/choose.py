"""What a re-sync rewrites, from its Params: ``what`` is ``last_validation`` (the rows the
newest finished validation named) or ``tables`` (the named target tables, compared again
first so that only differing rows move).

A table whose differences the validation could not all name (over
``max-pending-row-count``) or that it failed to compare is compared again, as if named.
Pending rows (not confirmed while replication caught up) are rewritten too: rewriting a row
that was in fact equal costs one write and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dm_core.errors import ErrorCode

WHATS = ("last_validation", "tables")


@dataclass
class Choice:
    compare: list[str] = field(default_factory=list)     # target tables to compare first (schema.table)
    keys: dict[str, list[dict]] = field(default_factory=dict)   # target table → keys to rewrite
    validation_run: str | None = None                    # the validation the keys come from
    why: str = ""

    def to_dict(self) -> dict:
        return {"compare": self.compare, "keys": {t: len(k) for t, k in self.keys.items()},
                "validation_run": self.validation_run, "why": self.why}


def keys_of(result: dict, tables: set[str] | None = None) -> tuple[dict[str, list[dict]], list[str]]:
    """(keys to rewrite per table, tables to compare again) of a stored validation result."""
    keys: dict[str, list[dict]] = {}
    again: list[str] = []
    for t in result.get("tables", []):
        name = t["target"]
        if tables is not None and name not in tables:
            continue
        if t.get("error") or t.get("more_differences"):
            again.append(name)
            continue
        found = [d["key"] for d in [*t.get("differences", []), *t.get("pending", [])]]
        if found:
            keys[name] = found
    return keys, again


def choose(what: str, tables: list[str], last: dict | None, known: list[str]) -> Choice:
    """``last``: the newest finished validation result (None: none ran); ``known``: the
    task's target tables."""
    if what not in WHATS:
        raise ErrorCode.RESYNC_INVALID.error(f"Param what: {what!r} is not one of {', '.join(WHATS)}")
    if what == "tables":
        names = [t.strip() for t in tables if t and t.strip()]
        if not names:
            raise ErrorCode.RESYNC_INVALID.error("Param tables: empty; name the target tables to re-sync")
        unknown = [t for t in names if t not in known]
        if unknown:
            raise ErrorCode.RESYNC_INVALID.error(
                f"Param tables: {', '.join(unknown)} not a target table of the task (its tables: "
                f"{', '.join(known) or 'none'})")
        return Choice(compare=list(dict.fromkeys(names)), why=f"tables named: {', '.join(names)}")
    if last is None:
        raise ErrorCode.RESYNC_INVALID.error(
            "what=last_validation, but no validation of the task has finished",
            workaround="run dm_<task>_validate first, or re-sync tables by name (what=tables)")
    keys, again = keys_of(last)
    run = last.get("run_id")
    n = sum(len(k) for k in keys.values())
    why = f"validation run {run}: {n} differing row(s) in {len(keys)} table(s)"
    if again:
        why += f"; compared again (not every difference named): {', '.join(again)}"
    return Choice(compare=again, keys=keys, validation_run=run, why=why)
