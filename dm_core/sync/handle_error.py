"""What an operator tells a source to do with one binlog event: DM's ``binlog`` command
(``handle-error``): ``skip``, ``replace``, ``inject``, ``revert`` and ``list``.

An operation is kept in the state store for a (task, source, binlog position) until the
source's checkpoint moves past that position:

* ``skip`` — the event is not applied (a DDL, or a row transaction the downstream rejected);
* ``replace SQL...`` — the DDL is replaced by the given DDL statements, which are read as if
  the upstream had written them at that position: routed, filtered and, on a sharded table,
  coordinated through the shard DDL lock like the statement they replace. On a rejected row
  transaction (shardflow's extension; DM handles DDL only) the statements run downstream as
  written;
* ``inject SQL...`` — the given DDL statements are read first, then the event itself;
* ``revert`` — forget an operation that has not taken effect yet;
* ``list`` — the operations still waiting, at or after a position.

Without ``-b`` an operation is for the event the source is paused on (its ``error_pos``);
with ``-b FILE:POS`` it is for the event at that position, which may lie ahead: the DDL's
position as ``query-status`` reports it (where its event group starts) or as ``SHOW BINLOG
EVENTS`` lists its QUERY event; both name the same statement.

Replay: an operation stays until the checkpoint is past its event, so a window that dies
after running a replacement reads the event again and applies the operation again; the
replacement's DDL runs as a replay (statements already in effect downstream are passed by,
dm_core/ddl/replay.py).

    >>> statements_for(ErrorOp(1, "inject", Position("mysql-bin.000001", 4), ("ALTER TABLE d.t ADD c INT",)),
    ...                "ALTER TABLE d.t ADD UNIQUE (c)")
    ['ALTER TABLE d.t ADD c INT', 'ALTER TABLE d.t ADD UNIQUE (c)']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dm_core.ddl.kind import ddl_event_type
from dm_core.ddl.text import table_spans, tokenize
from dm_core.errors import ErrorCode
from dm_core.position import Position

OPS = ("skip", "replace", "inject")           # operations that act on an event
COMMANDS = (*OPS, "revert", "list")          # what `dmctl binlog` takes

_POS = re.compile(r"^\(?\s*([^\s,:()]+)\s*[:,]\s*(\d+)\s*\)?$")


@dataclass(frozen=True)
class ErrorOp:
    id: int
    op: str                       # skip | replace | inject
    pos: Position                 # the event it acts on
    sqls: tuple[str, ...] = ()    # replace / inject: the statements

    def describe(self) -> str:
        what = f"{self.op} at {self.pos}"
        return what + (f": {'; '.join(self.sqls)}" if self.sqls else "")


def parse_binlog_pos(text: str) -> Position:
    """``mysql-bin.000001:2345`` (DM's ``-b``) or ``(mysql-bin.000001, 2345)`` (as query-status
    prints it).

    >>> parse_binlog_pos("mysql-bin.000003:1234"), parse_binlog_pos("(mysql-bin.000003, 1234)")
    (Position(file='mysql-bin.000003', pos=1234, gtid=None), Position(file='mysql-bin.000003', pos=1234, gtid=None))
    >>> parse_binlog_pos("1234")
    Traceback (most recent call last):
    ...
    dm_core.errors.Terminal: [code=10001:config] binlog position '1234' is not FILE:POS
    workaround: Give the position as the binlog file and offset, e.g. `-b mysql-bin.000001:2345` (`dmctl query-status TASK` shows where a source is paused; SHOW BINLOG EVENTS on the upstream lists the others).
    """
    m = _POS.match(text.strip())
    if not m or not re.search(r"\.\d+$", m.group(1)):
        raise ErrorCode.CONFIG_INVALID.error(
            f"binlog position {text!r} is not FILE:POS",
            workaround="Give the position as the binlog file and offset, e.g. `-b mysql-bin.000001:2345` "
                       "(`dmctl query-status TASK` shows where a source is paused; SHOW BINLOG EVENTS on the "
                       "upstream lists the others).")
    return Position(m.group(1), int(m.group(2)))


def split_statements(text: str) -> list[str]:
    """The statements of ``text``, split at semicolons outside quotes and comments.

    >>> split_statements("alter table d.t add c int default ';'; alter table d.t add unique(c);")
    ["alter table d.t add c int default ';'", 'alter table d.t add unique(c)']
    """
    out, start = [], 0
    for tok in tokenize(text):
        if tok.kind == "punct" and tok.text == ";":
            out.append(text[start:tok.start])
            start = tok.end
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def is_ddl(sql: str) -> bool:
    return bool(ddl_event_type(sql))


def check_statements(sqls: list[str]) -> None:
    """Replacement and injected statements must be DDL that names its database: they are read
    as the upstream's own statements, with no session database to fall back on (DM's rule)."""
    if not sqls:
        raise ErrorCode.CONFIG_INVALID.error("binlog replace|inject: give the statement(s) to run",
                                             workaround="e.g. `dmctl binlog replace TASK \"ALTER TABLE db.t ...\"`.")
    for sql in sqls:
        if not is_ddl(sql):
            raise ErrorCode.CONFIG_INVALID.error(
                f"binlog replace|inject takes DDL statements only, not: {sql}",
                workaround="Give ALTER/CREATE/DROP statements; a rejected row transaction can only be skipped "
                           "or replaced (without -b) with SQL run downstream as written.")
        spans = table_spans(sql, None)
        if not spans or any(not s.schema for s in spans):
            raise ErrorCode.CONFIG_INVALID.error(
                f"binlog replace|inject: name the database of every table in: {sql}",
                workaround="Write the upstream names in full, e.g. `ALTER TABLE db.t1 ...`.")


def statements_for(op: ErrorOp, original: str | None) -> list[str]:
    """What the syncer reads in place of the event's statement."""
    if op.op == "skip":
        return []
    if op.op == "replace":
        return list(op.sqls)
    return [*op.sqls, *([original] if original else [])]


class PendingOps:
    """A source's operations still waiting, by position (loaded once per window)."""

    def __init__(self, ops: list[ErrorOp]):
        self.ops = sorted(ops, key=lambda op: op.pos.key())
        self._by_key = {op.pos.key(): op for op in ops}

    @classmethod
    def load(cls, store, task: str, source_id: str, checkpoint: Position | None = None) -> "PendingOps":
        """The operations of a source; those for events before ``checkpoint`` took effect
        (or were never met: the stream is past them) and are marked done."""
        ops = [ErrorOp(i, op, parse_binlog_pos(pos), tuple(sqls)) for i, op, sqls, pos in
               store.error_ops(task, source_id)]
        done = [op.id for op in ops if checkpoint is not None and op.pos.key() < checkpoint.key()]
        store.error_ops_done(done)
        return cls([op for op in ops if op.id not in done])

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def at(self, *positions: Position | None) -> ErrorOp | None:
        """The operation for an event known by any of ``positions`` (its group's start, its
        QUERY event's own offset)."""
        for p in positions:
            if p is not None and p.key() in self._by_key:
                return self._by_key[p.key()]
        return None
