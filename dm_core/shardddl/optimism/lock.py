"""The optimistic shard DDL lock of one (task, target table): a pure state machine.

Members are (source, upstream table) pairs, each with the schema it is known to have;
``joined`` is what the downstream table has (or will have once the exec ops created so
far are done). A member that has not reported yet has ``initial``, the target's schema
when the lock was created; an expected source that has not reported at all counts as one
such member, as DM's lock gives every table it has not heard from the schema the lock was
created with (a column one shard added and dropped again leaves the downstream; a source
that was behind and adds it later adds it again).

1. ``report(info)``: the member's schema after its DDL is computed (its tracked schema +
   the DDL's changes; a CREATE TABLE gives a new member its own schema). A DDL replayed
   in the source's safe-mode range (``info.replay``) may predate the target, whose schema
   every member starts from: its changes already in the tracked schema are left out. Renaming
   a column (RENAME COLUMN, CHANGE a b) or converting it to a type of another family merges
   only once every shard has done it: the member is *held* (``hold``; ``_hold_or_resolve``,
   DM's ConflictSkipWaitRedirect), its source goes on without that table and replays it once
   the last shard's statement ran downstream; two shards doing it two ways is a conflict.
   Changes that can never merge are *hard* conflicts and wait for a person: a character set
   changed to anything but utf8mb4, other statements, a change that does not fit the
   tracked schema. Narrowing a type within its family or NULL → NOT NULL is not: the join
   keeps the wider definition while any shard has it (DM: schemas before and after such a
   DDL compare). Table options (``ENGINE=`` ...), a character set changed to utf8mb4
   (DEFAULT or CONVERT TO), an index made visible or invisible and partition maintenance
   change nothing the lock tracks and run downstream as the shard wrote them (``PASS_THROUGH``).
2. ``settle``: pending members are tried together against everyone's schemas
   (``schema.join_schemas``); on a join conflict the latest member named by it is set
   aside (a *soft* conflict, retried at every later settle: e.g. a NOT NULL column
   without default waits until every shard has added it, then runs once) and the rest
   are tried again. The accepted members' new schemas give a new join; the downstream
   widens to it (``widen_only``), and ``diff_schemas`` says which single-change statements
   do that, then the accepted members' pass-through statements as they wrote them (DM runs
   them as they come: they widen its join or it does not see them). The earliest accepted
   member gets ``exec`` with them (its own statement text
   where it matches the change, so ``AFTER col`` survives), the others ``skip``. No change
   to the join (a column another shard already added, a column dropped while others
   still have it, a unique key not yet on every shard) → ``skip`` for everyone.
3. exec ops run in creation order: every op waits (``wait``) until the exec ops created
   before it are done, so no member writes rows for a schema the downstream lacks.
4. ``ack``: the op is done; the member's position is remembered (a DDL met again after a
   restart gets ``skip``, ``done``).

A column a member drops stays *partly dropped* (``dropped``: column → members that dropped
it) until the downstream has dropped it too and no exec op is left (DM's dropped columns).
Meanwhile a member that dropped it may not add it back: the downstream still holds the
values its rows had, which the re-added column upstream has lost (DM: "add column b that
wasn't fully dropped in downstream"). That conflict is judged again when the member reports
the DDL again (after resume-task), and goes once the drop reached the downstream.
5. ``unlock``: the operator settles conflicts (see ``unlock``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dm_core.shardddl.common import (DONE, EXEC, EXECUTING, HOLD, SKIP, WAIT, LockBase, Operation,
                                     pos_from_json, pos_to_json)
from dm_core.shardddl.ddl_norm import comparison_key, schema_from_create, statement_changes
from dm_core.shardddl.errors import ShardDDLLockError, ShardDDLUnsupported
from dm_core.shardddl.optimism.info import Info
from dm_core.shardddl.schema import (Change, JoinConflict, SchemaError, TableSchema, diff_schemas, join_schemas,
                                     join_type, same_change, widen_only)
from dm_core.position import Position

Key = tuple[str, str, str]   # (source, upstream schema, upstream table)


def label(k: Key) -> str:
    return f"{k[0]} `{k[1]}`.`{k[2]}`" if k[2] else f"{k[0]} (not reported yet)"


@dataclass
class Pending:
    ddls: tuple[str, ...]
    changes: list[Change]
    schema_after: TableSchema | None
    position: Position
    seq: int
    conflict: str = ""
    hard: bool = False
    op_step: int | None = None          # the op made when the change was accepted
    hold: bool = False                  # held until every shard runs it too (see ``_hold_or_resolve``)
    note: str = ""                      # why it is held, for the source's log and show-ddl-locks
    strict: bool = False                # strict-optimistic-shard-mode: never held, a conflict instead

    def to_json(self) -> dict:
        return {"ddls": list(self.ddls), "changes": [c.to_dict() for c in self.changes],
                "schema_after": self.schema_after.to_dict() if self.schema_after is not None else None,
                "position": pos_to_json(self.position), "seq": self.seq, "conflict": self.conflict,
                "hard": self.hard, "op_step": self.op_step, "hold": self.hold, "note": self.note,
                "strict": self.strict}

    @classmethod
    def from_json(cls, d: dict | None) -> "Pending | None":
        if not d:
            return None
        return cls(tuple(d["ddls"]), [Change.from_dict(c) for c in d["changes"]],
                   TableSchema.from_dict(d["schema_after"]) if d.get("schema_after") is not None else None,
                   pos_from_json(d["position"]), d["seq"], d.get("conflict", ""), d.get("hard", False),
                   d.get("op_step"), d.get("hold", False), d.get("note", ""), d.get("strict", False))


@dataclass
class Member:
    schema: TableSchema
    pending: Pending | None = None
    done_pos: Position | None = None

    def to_json(self) -> dict:
        return {"schema": self.schema.to_dict(), "pending": self.pending.to_json() if self.pending else None,
                "done_pos": pos_to_json(self.done_pos)}

    @classmethod
    def from_json(cls, d: dict) -> "Member":
        return cls(TableSchema.from_dict(d["schema"]), Pending.from_json(d.get("pending")),
                   pos_from_json(d.get("done_pos")))


def _hard_conflict(changes: list[Change], before: TableSchema) -> str:
    for ch in changes:
        if ch.op == "add_column" and ch.column is not None and (
                ch.column.auto_increment or "UNIQUE" in ch.column.extra.upper()):
            if not ch.column.auto_increment:
                # DM's lock lets a UNIQUE column through and TiDB refuses it downstream, on every
                # shard (handle_error_2's 4215): say it as TiDB does, where DM users look for it
                return (f"unsupported add column '{ch.column.name}' constraint UNIQUE KEY when altering a "
                        f"sharded table: `{ch.sql}` (each shard fills it with its own values)")
            return (f"there will be conflicts if `{ch.sql}` is applied to the downstream: column "
                    f"`{ch.column.name}` is AUTO_INCREMENT, and each shard fills it with its own values")
        if ch.op == "modify_column" and not ch.new_name and ch.name.lower() in _primary_columns(before):
            old = before.column(ch.name)
            if old is not None and _converts(old, ch.column):
                # DM's tracker refuses it on every shard ("Unsupported modify column: this column has
                # primary key flag"): the key's values would change type under the merged table's rows
                return (f"changing primary key column `{ch.name}` from {old.type} to {ch.column.type} converts "
                        f"it (`{ch.sql}`): unsupported modify column, this column has primary key flag")
        if ch.op == "charset" and ch.name not in WIDEST_CHARSETS:
            return (f"`{ch.sql}` changes the table's character set to {ch.name}: only a change to "
                    f"{' or '.join(WIDEST_CHARSETS)}, which holds the text of every other character set, merges")
        if ch.op in ("other", "rename_index") and not table_option(ch):
            return f"`{ch.sql}` is not supported in optimistic mode"
    return ""


def _primary_columns(schema: TableSchema) -> set[str]:
    return {c.lower() for i in schema.indexes if i.kind == "primary" for c in i.columns}


def _converts(old, new) -> bool:
    """``new`` is of another type family than ``old``. A narrower type of one family, or NOT
    NULL, is not (DM: the schemas before and after compare, a "normal" DDL): the join keeps the
    wider definition while another shard has it, so nothing runs downstream (``widen_only``)."""
    return join_type(old.type, new.type) not in (old.type, new.type)


def _renamed_to(ch: Change) -> str:
    """The column's new name if ``ch`` renames it (RENAME COLUMN, CHANGE a b), else ""."""
    if ch.op == "rename_column":
        return ch.new_name
    return ch.column.name if ch.op == "modify_column" and ch.new_name else ""


def _until_every_shard(changes: list[Change], before: TableSchema) -> str:
    """Why a change cannot merge with shards that have not run it, though it merges once they
    all have (DM's ConflictSkipWaitRedirect): renaming a column, converting it to a type of
    another family. "" when the change merges now."""
    for ch in changes:
        if _renamed_to(ch):
            return f"renaming column `{ch.name}` to `{_renamed_to(ch)}` (`{ch.sql}`)"
        if ch.op == "modify_column":
            old = before.column(ch.name)
            if old is not None and _converts(old, ch.column):
                return f"changing column `{ch.name}` from {old.type} to {ch.column.type} converts it (`{ch.sql}`)"
    return ""


def _same_ddls(a: Pending, b: Pending) -> bool:
    return [comparison_key(d) for d in a.ddls] == [comparison_key(d) for d in b.ddls]


def _disagreement(changes: list[Change], after: TableSchema, other: TableSchema) -> str:
    """What ``other`` lacks of the renames and conversions in ``changes`` (which made ``after``):
    "" when it has them all (the shard ran the same change)."""
    for ch in changes:
        renamed = _renamed_to(ch)
        if not renamed and ch.op != "modify_column":
            continue
        name = renamed or ch.name
        if renamed and ch.name.lower() != name.lower() and other.column(ch.name) is not None:
            return f"still has column `{ch.name}`"
        want, got = after.column(name), other.column(name)
        if got is None:
            return f"has no column `{name}`"
        if want is not None and not got.same_definition(want):
            return f"has `{name}` {got.type}{'' if got.nullable else ' NOT NULL'}, not {want.type}"
    return ""


HELD_ROWS = "this table's rows and DDLs are held back and replayed once every shard has run it"

_OPTION = re.compile(r"^ALTER TABLE (?:`(?:[^`]|``)*`|\w+)\.(?:`(?:[^`]|``)*`|\w+) (?:ENGINE|ROW_FORMAT|COMMENT|"
                     r"AUTO_INCREMENT|AVG_ROW_LENGTH|CHECKSUM|KEY_BLOCK_SIZE|MAX_ROWS|MIN_ROWS|PACK_KEYS|"
                     r"STATS_AUTO_RECALC|STATS_PERSISTENT|STATS_SAMPLE_PAGES|DELAY_KEY_WRITE)\s*=", re.I)


def table_option(ch: Change) -> bool:
    """A table option (``ENGINE=InnoDB``, ``ROW_FORMAT=...``, ``COMMENT=...``): no column or
    index changes, so no conflict; DM runs such a statement downstream as it comes (its
    schemas before and after compare equal), and so does the owner here."""
    return ch.op == "other" and bool(_OPTION.match(ch.sql))


# DM's schema comparison orders character sets (utf8 below utf8mb4): a shard widening its table to
# utf8mb4 widens the merged table at once, whatever the other shards still have
WIDEST_CHARSETS = ("utf8mb4",)
# changes that leave the tracked schema as it is but are for the downstream too: DM runs a DDL that
# widens the join, or that its comparison does not see (index visibility), as it comes
PASS_THROUGH = ("charset", "index_visibility")


def _in_effect(ch: Change, schema: TableSchema) -> bool:
    """Whether ``schema`` already shows change ``ch`` (a DDL replayed from before the
    target was created: its member's tracked schema, the target's, has it already)."""
    if ch.op == "add_column":
        return schema.column(ch.column.name) is not None
    if ch.op == "drop_column":
        return schema.column(ch.name) is None
    if ch.op == "modify_column" and not ch.new_name:
        old = schema.column(ch.name)
        return old is not None and old.same_definition(ch.column)
    if ch.op == "add_index":
        return schema.index(ch.index.name) is not None
    if ch.op == "drop_index":
        return schema.index(ch.name) is None
    return False


class Lock(LockBase):
    mode = "optimistic"
    step_word = "op"

    def __init__(self, lock_id: str, task: str, target: tuple[str, str], sources=(),
                 initial: TableSchema | None = None):
        super().__init__(lock_id, task, target, sources)
        self.initial = initial
        self.joined = initial
        self.members: dict[Key, Member] = {}
        self.op_seq = 0
        self.dropped: dict[str, list[Key]] = {}   # partly dropped column (lower case) → members that dropped it
        self.departed: dict[Key, TableSchema] = {}   # members that left the task, with their schema then

    # ---- queries ------------------------------------------------------------------------------
    @property
    def conflict(self) -> str:
        pend = sorted((m.pending for m in self.members.values() if m.pending is not None and m.pending.conflict),
                      key=lambda p: p.seq)
        return pend[0].conflict if pend else ""

    @property
    def status(self) -> str:
        if self.conflict:
            return "conflict"
        if any(op.state != DONE for op in self.ops.values()):
            return "ready"
        if any(m.pending is not None for m in self.members.values()):
            return "waiting"
        return "idle"

    def schemas(self, use_pending: set[Key] = frozenset()) -> dict[str, TableSchema]:
        """Every member's schema by label (the pending one for members in ``use_pending``)."""
        out = {}
        for k, m in sorted(self.members.items()):
            if self.sources and k[0] not in self.sources:
                continue  # a source no longer expected (stopped): its tables count again when it is back
            s = m.pending.schema_after if k in use_pending and m.pending is not None else m.schema
            out[label(k)] = s
        # A source that has not reported has run no DDL on the target since the lock was made:
        # it has the schema of then (DM's assumption, and its lock's). Taken to have the
        # downstream's instead, it kept a column one shard added and dropped again downstream
        # for good (DM's INIT_SCHEMA case), waiting for a DROP that never comes.
        if self.initial is not None:
            for src in self.silent_sources():
                out[label((src, "", ""))] = self.initial
        return out

    def silent_sources(self) -> list[str]:
        """Expected sources that have reported no DDL of this table (they count with ``initial``)."""
        reported = {k[0] for k in self.members}
        return [s for s in self.sources if s not in reported]

    def operation_for(self, source: str, table: tuple[str, str] | None = None) -> Operation | None:
        mine = sorted((op for (s, _), op in self.ops.items() if s == source and op.state != DONE
                       and (table is None or op.upstream == tuple(table))), key=lambda o: o.order)
        if mine:
            op = mine[0]
            before = self._exec_waits_for(op)
            if before is not None:
                return op.view(action=WAIT, message=f"waiting for {before.source} to execute "
                                                    f"`{'; '.join(before.ddls)}`")
            return op.view()
        for k, m in sorted(self.members.items()):
            if k[0] != source or m.pending is None or m.pending.op_step is not None:
                continue
            if table is not None and (k[1], k[2]) != tuple(table):
                continue
            p = m.pending
            if p.hold:
                return Operation(self.lock_id, self.task, source, 0, HOLD, p.ddls,
                                 message=p.note or "held: waiting for the coordinator to name the task's sources",
                                 upstream=(k[1], k[2]))
            msg = p.conflict or ("waiting for the coordinator to name the task's sources" if not self.sources
                                 else "waiting")
            return Operation(self.lock_id, self.task, source, 0, WAIT, p.ddls, message=msg,
                             conflict=p.conflict, upstream=(k[1], k[2]))
        return None

    def describe(self) -> dict:
        return {
            "lock_id": self.lock_id, "task": self.task, "mode": self.mode, "target": list(self.target),
            "status": self.status, "conflict": self.conflict, "sources": list(self.sources),
            "joined": [c.definition() for c in (self.joined.columns if self.joined else ())],
            "members": [{"source": k[0], "table": [k[1], k[2]],
                         "columns": [c.definition() for c in m.schema.columns],
                         "pending": list(m.pending.ddls) if m.pending else [],
                         "conflict": m.pending.conflict if m.pending else "",
                         "held": m.pending.note if m.pending and m.pending.hold else ""}
                        for k, m in sorted(self.members.items())],
            "operations": [op.to_dict() for _, op in sorted(self.ops.items())],
        }

    # ---- transitions -----------------------------------------------------------------------------
    def seed(self, initial: TableSchema, members: dict[Key, TableSchema]) -> None:
        """The full phase's snapshot: the target's schema and each member table's own, as
        upstream had it then (DM: each table's schema as its source's schema tracker holds it
        when the task starts), so shards of different shapes merge (DM's DIFFERENT_SCHEMA
        cases). Members the lock knows already keep theirs."""
        if self.initial is None:
            self.initial = self.joined = initial
        for k, sch in members.items():
            self.members.setdefault(tuple(k), Member(sch))

    def set_schema(self, key: Key, schema: TableSchema) -> str:
        """`dmctl binlog-schema update` (DM's ``--sync``, on by default): the operator says what
        member ``key``'s table is (DM puts an info with that table before and after its DDL, and
        ignores conflicts). A task started incrementally has nothing better than the target's
        schema for a shard it has not heard from; told each shard's own, the join drops a column
        once no shard has it. A DDL of the member not yet carried out is forgotten: the source
        reads it again after resume-task and it is judged against the new schema. Returns what
        changed, for the command's output."""
        key = tuple(key)
        m = self.members.get(key)
        if m is not None and m.pending is not None and m.pending.op_step is not None:
            raise ShardDDLLockError(
                f"{label(key)}: its DDL `{'; '.join(m.pending.ddls)}` is being carried out downstream in lock "
                f"{self.lock_id}; set its schema after that DDL finished (`dmctl shard-ddl-lock` shows it)")
        self.departed.pop(key, None)
        if m is None:
            self.members[key] = Member(schema)
            said = f"{label(key)} joins lock {self.lock_id} with the schema given"
        else:
            forgot = f"; its DDL `{'; '.join(m.pending.ddls)}` is read again after resume" if m.pending else ""
            m.schema, m.pending = schema, None
            said = f"{label(key)} has the schema given in lock {self.lock_id}{forgot}"
        self.settle()
        return said

    def remove_member(self, key: Key, *, remember: bool = False) -> bool:
        """A shard dropped upstream leaves the lock (DM's TryRemoveTable): its columns stop
        counting in the join, so a column only it still had leaves the merged table at the
        next DDL that changes the join, as in DM. A member whose DDL is being carried out
        stays. ``remember``: the table only left the task (its block-allow list); if it comes
        back it resumes with the schema it had (DM's tracker keeps it). Returns whether it left."""
        m = self.members.get(tuple(key))
        if m is None or (m.pending is not None and m.pending.op_step is not None):
            return False
        if remember:
            self.departed[tuple(key)] = m.schema
        del self.members[tuple(key)]
        self.settle()
        return True

    def report(self, info: Info) -> Operation:
        if info.lock_id != self.lock_id:
            raise ShardDDLLockError(f"info for {info.lock_id} given to lock {self.lock_id}")
        creates = len(info.ddls) == 1 and info.ddls[0].lstrip().upper().startswith("CREATE TABLE")
        if self.initial is None:
            init = info.schema_before or (schema_from_create(info.ddls[0]) if creates else None)
            if init is None:
                raise ShardDDLLockError(f"lock {self.lock_id} is new and the info carries no schema_before: the "
                                        f"syncer must read the target table's schema downstream first")
            self.initial = self.joined = init
        key: Key = (info.source, info.table[0], info.table[1])
        for t in (info.tables or (info.table,)) + (info.table,):
            k = (info.source, t[0], t[1])
            if k not in self.members:
                back = self.departed.pop(k, None)
                self.members[k] = Member(back if back is not None else self.initial)
                if back is not None:
                    self._count_again(back, info.schema_before)
        m = self.members[key]
        pos, ddls = info.position, tuple(info.ddls)
        if m.done_pos is not None and pos.key() <= m.done_pos.key():
            return Operation(self.lock_id, self.task, info.source, 0, SKIP, ddls, state=DONE, replayed=True,
                             upstream=info.table, message=f"DDL at {pos} already finished")
        if m.pending is not None:
            same = m.pending.position == pos and [comparison_key(d) for d in m.pending.ddls] == \
                [comparison_key(d) for d in ddls]
            if same and not (m.pending.hard and m.pending.op_step is None):
                self.settle()
                return self.operation_for(info.source, info.table)
            # a hard conflict is judged again when the source reads its DDL again (resume-task)
            if not same and m.pending.op_step is not None:
                raise ShardDDLLockError(f"{label(key)} reports `{'; '.join(ddls)}` at {pos} while its DDL "
                                        f"`{'; '.join(m.pending.ddls)}` is not finished in lock {self.lock_id}")
            m.pending = None  # a conflicting DDL replaced by the operator (binlog replace) or re-read
        self.seq += 1
        changes: list[Change] = []
        conflict, after, waits = "", None, ""
        if creates:
            after = schema_from_create(ddls[0])
        else:
            try:
                for d in ddls:
                    changes.extend(statement_changes(d))
            except ShardDDLUnsupported as e:
                conflict = str(e.message)
            if info.replay:  # the member's tracked schema starts at the target's, created after some DDLs
                changes = [ch for ch in changes if not _in_effect(ch, m.schema)]
            conflict = conflict or _hard_conflict(changes, m.schema)
            waits = "" if conflict else _until_every_shard(changes, m.schema)
            if waits and info.strict:   # DM's strict-optimistic-shard-mode: no skip and redirect
                conflict, waits = waits, ""
            if not conflict:
                try:
                    after = m.schema.apply(changes)
                except SchemaError as e:
                    conflict = f"`{'; '.join(ddls)}` does not fit the tracked schema of {label(key)}: {e}"
            conflict = conflict or self._not_fully_dropped(key, changes, ddls)
        if conflict:
            conflict = self._conflict_text(key, ddls, conflict)
        m.pending = Pending(ddls, changes, after, pos, self.seq, conflict, bool(conflict),
                            hold=bool(waits) and not conflict, strict=info.strict)
        self.settle()   # a held change: _hold_or_resolve of this member, the newest held one
        return self.operation_for(info.source, info.table)

    def _conflict_text(self, key: Key, ddls, why: str) -> str:
        """What the source pauses with: DM's ErrSyncerShardDDLConflict wording, then ours."""
        return (f"fail to handle shard ddl {list(ddls)} in optimistic mode, because schema conflict detected, "
                f"conflict error: shard DDL conflict in lock {self.lock_id}: {label(key)}: {why}")

    def settle(self) -> None:
        if not self.sources:
            return  # who takes part is unknown: an absent source may still write what a DDL drops
        # the newest held rename or conversion: just reported, or it was the last one without the
        # change that stopped or was dropped
        held = [k for k in self.members if self._rewrite_held(k) and k[0] in self.sources]
        if held:
            self._hold_or_resolve(max(held, key=lambda k: self.members[k].pending.seq))
        cands = sorted((k for k, m in self.members.items() if m.pending is not None and not m.pending.hard
                        and not self._rewrite_held(k) and m.pending.op_step is None),
                       key=lambda k: self.members[k].pending.seq)
        if not cands:
            return
        accepted = list(cands)
        set_aside: list[Key] = []
        while accepted:
            try:
                join_schemas(self.schemas(set(accepted)))
                break
            except JoinConflict as e:
                named = [k for k in accepted if label(k) in e.members]
                if not named:
                    set_aside.extend(accepted)
                    accepted = []
                    break
                worst = max(named, key=lambda k: self.members[k].pending.seq)
                accepted.remove(worst)
                set_aside.append(worst)
        for k in set_aside:
            p = self.members[k].pending
            try:
                join_schemas(self.schemas(set(accepted) | {k}))
                msg, missing = "waits for the other shards' DDLs", False
            except JoinConflict as e:
                msg, missing = str(e), e.missing
            other = next((j for j in sorted(self.members) if j != k and self._held(j)
                          and not _same_ddls(self.members[j].pending, p)), None)
            if missing and not p.strict and other is None:
                # a NOT NULL column the other shards may add too: held back, not paused (DM's
                # ConflictSkipWaitRedirect); tried again at every settle
                p.hold, p.conflict = True, ""
                p.note = f"{msg}; {HELD_ROWS}"
                continue
            if missing and other is not None:   # held changes must agree (DM: a conflict among conflict tables)
                msg += (f"; while {label(other)} is held with `{'; '.join(self.members[other].pending.ddls)}`, "
                        f"which this change does not agree with")
            p.hold, p.note = False, ""
            p.conflict = self._conflict_text(k, p.ddls, msg)
        if not accepted:
            return
        new_join = join_schemas(self.schemas(set(accepted)))
        downstream = widen_only(self.joined, new_join)
        diff = diff_schemas(self.target[0], self.target[1], self.joined, downstream)
        own = [ch for k in accepted for ch in self.members[k].pending.changes]
        stmts = []
        for ch in diff + [o for o in own if table_option(o)]:
            mine = next((o for o in own if same_change(o, ch) and o.sql), None)
            s = mine.sql if mine is not None else ch.sql
            if s not in stmts:
                stmts.append(s)
        # partition maintenance leaves every schema as it was and runs as written (DM: a DDL
        # whose table is the same before and after is executed directly), by the owner
        stmts += [ch.sql for ch in own if ch.op == "partition" and ch.sql not in stmts]
        for o in own:
            if o.op in PASS_THROUGH and o.sql not in stmts:
                stmts.append(o.sql)
        self.joined = downstream
        # the source waiting at its DDL runs it, not one whose table is held back (it would have to
        # replay up to that DDL first); its op comes first so a held member's replay waits for it
        owner = next((k for k in accepted if not self.members[k].pending.hold), accepted[0])
        exec_message = "execute the DDL downstream" + self._silent_drop_note(diff)
        for k in [owner] + [k for k in accepted if k != owner]:
            m = self.members[k]
            m.schema = m.pending.schema_after
            m.pending.conflict, m.pending.hold, m.pending.note = "", False, ""
            self._track_drops(k, m.pending.changes)
            self.op_seq += 1
            action = EXEC if k == owner and stmts else SKIP
            op = Operation(self.lock_id, self.task, k[0], self.op_seq, action, tuple(stmts) if action == EXEC
                           else m.pending.ddls, owner=owner[0], upstream=(k[1], k[2]), order=self.op_seq,
                           message=exec_message if action == EXEC else
                           ("the merged schema already has this change" if not stmts else
                            f"{label(owner)} executes the change"))
            self.ops[(k[0], op.step)] = op
            m.pending.op_step = op.step

    def _silent_drop_note(self, diff: list[Change]) -> str:
        """What an operator should know when a column leaves the downstream while an expected
        source has reported nothing: it counts with the lock's first schema (DM's INIT_SCHEMA),
        so a source that is merely behind and adds the column later adds it back."""
        drops = [ch.name for ch in diff if ch.op == "drop_column"]
        silent = self.silent_sources() if drops else []
        if not silent:
            return ""
        cols = ", ".join(f"`{c}`" for c in drops)
        return (f"; {', '.join(silent)} reported no DDL of this table yet and count{'s' if len(silent) == 1 else ''} "
                f"with the schema the lock began with, so {cols} leave{'s' if len(drops) == 1 else ''} the "
                f"downstream now; a source that is behind and adds {cols} later adds it back (DM does the same)")

    def _hold_or_resolve(self, key: Key) -> None:
        """DM's ConflictSkipWaitRedirect: member ``key``'s pending change (a rename, a conversion)
        cannot merge while other shards lack it, and can once they all have it. Until then it is
        *held*: its source goes on without it, holding back that table's rows and DDLs (the
        source's ``HeldTables``), and nothing runs downstream. Held changes must agree with each
        other (two shards renaming one column two ways never merge: the later one is a conflict
        that pauses, DM's ConflictDetected). When every member has the change (an expected source
        that never reported has the lock's initial schema, so it has not), ``key``'s statements
        run downstream (``exec``) and every other held member gets ``skip``: its source replays
        the table from the held DDL on, meets the DDL again and finishes the op then."""
        if key[0] not in self.sources:
            return
        p = self.members[key].pending
        why = _until_every_shard(p.changes, self.members[key].schema)
        held = [k for k in sorted(self.members) if k != key and self._rewrite_held(k) and k[0] in self.sources]
        for k in held:
            q = self.members[k].pending
            bad = (_disagreement(q.changes, q.schema_after, p.schema_after)
                   or _disagreement(p.changes, p.schema_after, q.schema_after))
            if bad:
                p.hold, p.hard, p.note = False, True, ""
                p.conflict = self._conflict_text(
                    key, p.ddls, f"{why}, while {label(k)} ran `{'; '.join(q.ddls)}` (held until every shard runs "
                                 f"it): {label(key)} {bad}")
                return
        soft = next((k for k in sorted(self.members) if k != key and self._held(k) and not self._rewrite_held(k)),
                    None)
        if soft is not None:   # held changes must agree (DM: a conflict among conflict tables)
            p.hold, p.hard, p.note = False, True, ""
            p.conflict = self._conflict_text(
                key, p.ddls, f"{why}, while {label(soft)} is held with "
                             f"`{'; '.join(self.members[soft].pending.ddls)}` until every shard runs it")
            return
        group = [key] + held
        schemas = self.schemas(set(group))
        behind = [name for name, sch in schemas.items()
                  if any(_disagreement(self.members[k].pending.changes, self.members[k].pending.schema_after, sch)
                         for k in group)]
        if behind:
            p.note = f"{why}: held until {', '.join(behind)} run{'s' if len(behind) == 1 else ''} it too; {HELD_ROWS}"
            return
        try:
            join_schemas(schemas)
            downstream = self.joined.apply(p.changes)
        except (JoinConflict, SchemaError) as e:
            p.note = f"{why}: every shard has it, but it does not merge yet ({e}); {HELD_ROWS}"
            return
        self.joined = downstream
        for k in group:
            m = self.members[k]
            m.schema = m.pending.schema_after
            m.pending.hold, m.pending.note = False, ""
            self._track_drops(k, m.pending.changes)
            self.op_seq += 1
            mine = k == key
            op = Operation(self.lock_id, self.task, k[0], self.op_seq, EXEC if mine else SKIP,
                           p.ddls if mine else m.pending.ddls, owner=key[0], upstream=(k[1], k[2]),
                           order=self.op_seq,
                           message="execute the DDL downstream: every shard has run it" if mine else
                           f"{label(key)} executes the change; this table is replayed from its DDL on")
            self.ops[(k[0], op.step)] = op
            m.pending.op_step = op.step

    def _count_again(self, schema: TableSchema, downstream: TableSchema | None) -> None:
        """A member back in the task (DM: its source tables put again): its columns count in the
        join again where the downstream has them (the user may have added back what the lock
        dropped while it was away), so the shards dropping them later drop them downstream."""
        if self.joined is None or downstream is None:
            return
        extra = tuple(downstream.column(c.name) for c in schema.columns
                      if self.joined.column(c.name) is None and downstream.column(c.name) is not None)
        if extra:
            self.joined = replace(self.joined, columns=self.joined.columns + extra)

    def _held(self, k: Key) -> bool:
        """Member ``k``'s change is held (no op yet)."""
        p = self.members[k].pending
        return p is not None and p.hold and p.op_step is None

    def _rewrite_held(self, k: Key) -> bool:
        """A held rename or conversion (resolved by ``_hold_or_resolve``, not by the join)."""
        return self._held(k) and bool(_until_every_shard(self.members[k].pending.changes, self.members[k].schema))

    def ack(self, source: str, step: int) -> Operation:
        op = self.ops.get((source, step))
        if op is None:
            return Operation(self.lock_id, self.task, source, step, SKIP, (), state=DONE, message="already done")
        if op.state == DONE:
            return op.view()
        before = self._exec_waits_for(op)
        if before is not None:
            raise ShardDDLLockError(f"{source} cannot finish op {step} of lock {self.lock_id} before "
                                    f"{before.source} has executed `{'; '.join(before.ddls)}`")
        if op.action == EXEC:
            op.exec_index = len(op.ddls)
        self._finish(op)
        self.settle()
        return op.view()

    def unlock(self, owner: str | None = None, action: str = EXEC, force_remove: bool = False,
               table: tuple[str, str] | None = None) -> None:
        """The operator settles the lock (`dmctl shard-ddl-lock unlock`).

        * members in conflict or held (all, or those of source ``owner``, or of upstream ``table``,
          DM's ``-s SOURCE -d DB -t TABLE``) get ``action``:
          ``skip`` — the operator made the downstream right by hand (or it needs nothing):
          the member's new schema is accepted, nothing runs; ``exec`` — the member runs its
          own statements downstream as they are;
        * ``force_remove``: every pending member and every unfinished op is finished now as
          ``skip``; nothing runs.

        Afterwards ``joined`` is the join of all members if there is one (the operator has
        aligned the downstream), else it stays.
        """
        if action not in (EXEC, SKIP):
            raise ShardDDLLockError(f"unknown unlock action {action!r}: use exec or skip")
        if force_remove:
            for op in list(self.ops.values()):   # _finish drops done ops from self.ops
                if op.state != DONE:
                    op.action = SKIP if op.state != EXECUTING and op.exec_index == 0 else op.action
                    self._finish(op)
            for k, m in self.members.items():
                if m.pending is not None:
                    if m.pending.schema_after is not None:
                        m.schema = m.pending.schema_after
                        self._track_drops(k, m.pending.changes)
                    m.done_pos, m.pending = m.pending.position, None
        else:
            stuck = sorted((k for k, m in self.members.items() if m.pending is not None
                            and (m.pending.conflict or m.pending.hold) and m.pending.op_step is None and (owner is None or k[0] == owner)
                            and (table is None or (k[1], k[2]) == tuple(table))),
                           key=lambda k: self.members[k].pending.seq)
            if not stuck:
                raise ShardDDLLockError(f"lock {self.lock_id} has no conflicting DDL"
                                        + (f" of source {owner}" if owner else "")
                                        + (f" of table `{table[0]}`.`{table[1]}`" if table else ""))
            for k in stuck:
                m = self.members[k]
                if m.pending.schema_after is not None:
                    m.schema = m.pending.schema_after
                    self._track_drops(k, m.pending.changes)
                self.op_seq += 1
                op = Operation(self.lock_id, self.task, k[0], self.op_seq, action, m.pending.ddls, owner=k[0],
                               upstream=(k[1], k[2]), order=self.op_seq, message=f"unlocked by the operator ({action})")
                self.ops[(k[0], op.step)] = op
                m.pending.op_step, m.pending.conflict, m.pending.hold = op.step, "", False
        try:
            self.joined = join_schemas(self.schemas())
        except JoinConflict:
            pass
        self.settle()

    # ---- helpers --------------------------------------------------------------------------------
    def _not_fully_dropped(self, key: Key, changes: list[Change], ddls: tuple[str, ...]) -> str:
        """DM's ErrShardDDLOptimismAddNotFullyDroppedColumn: the member adds back a column it
        dropped (earlier, or in this same statement) while the downstream kept it for the other
        shards, whose column still holds the values the member's rows had before the drop."""
        dropped_here = set()
        for ch in changes:
            if ch.op == "drop_column":
                dropped_here.add(ch.name.lower())
            readded = ch.op == "add_column" and ch.column is not None and (
                key in self.dropped.get(ch.column.key, ())
                or (ch.column.key in dropped_here and self.joined is not None
                    and self.joined.column(ch.column.key) is not None))
            if readded:
                return (f"`{'; '.join(ddls)}` cannot be applied because schema conflict detected: add column "
                        f"{ch.column.name} that wasn't fully dropped in downstream (this table dropped it, and the "
                        f"downstream still has it with the values its rows had)")
        return ""

    def _track_drops(self, k: Key, changes: list[Change]) -> None:
        """The member's accepted changes: a DROP COLUMN makes the column partly dropped; an ADD
        the operator forced (unlock) takes the member off the column's droppers."""
        for ch in changes:
            if ch.op == "drop_column":
                who = self.dropped.setdefault(ch.name.lower(), [])
                if k not in who:
                    who.append(k)
            elif ch.op == "add_column" and ch.column is not None and k in self.dropped.get(ch.column.key, ()):
                self.dropped[ch.column.key].remove(k)

    def _finish(self, op: Operation) -> None:
        op.state = DONE
        m = self.members.get((op.source, op.upstream[0], op.upstream[1]))
        if m is not None and m.pending is not None and m.pending.op_step == op.step:
            m.done_pos, m.pending = m.pending.position, None
        for k in [k for k, o in self.ops.items() if o.state == DONE]:
            del self.ops[k]  # done ops decide nothing any more (a replayed DDL is known by its position)
        if not any(o.action == EXEC for o in self.ops.values()):
            # every DDL is downstream: a column the join lacks now is fully dropped there
            self.dropped = {c: who for c, who in self.dropped.items()
                            if who and self.joined is not None and self.joined.column(c) is not None}

    def _exec_waits_for(self, op: Operation) -> Operation | None:
        return next((o for o in sorted(self.ops.values(), key=lambda o: o.order)
                     if o.order < op.order and o.action == EXEC and o.state != DONE), None)

    # ---- persistence ---------------------------------------------------------------------------------
    def to_rows(self) -> tuple[dict, list[dict], list[dict]]:
        lock = {"lock_id": self.lock_id, "task": self.task, "mode": self.mode, "target_schema": self.target[0],
                "target_table": self.target[1], "status": self.status, "step": self.op_seq, "owner": None,
                "ddls": None, "conflict": self.conflict or None,
                "state": {"sources": list(self.sources), "seq": self.seq, "op_seq": self.op_seq,
                          "initial": self.initial.to_dict() if self.initial is not None else None,
                          "joined": self.joined.to_dict() if self.joined is not None else None,
                          "dropped": {c: [list(k) for k in who] for c, who in self.dropped.items()},
                          "departed": [[list(k), sch.to_dict()] for k, sch in sorted(self.departed.items())]}}
        members = [{"source_id": k[0], "upstream_schema": k[1], "upstream_table": k[2],
                    "ddls": list(m.pending.ddls) if m.pending else None,
                    "position": str(m.pending.position) if m.pending else None, "state": m.to_json()}
                   for k, m in sorted(self.members.items())]
        return lock, members, self._op_rows()

    @classmethod
    def from_rows(cls, lock: dict, members: list[dict], ops: list[dict]) -> "Lock":
        st = lock.get("state") or {}
        init = TableSchema.from_dict(st["initial"]) if st.get("initial") is not None else None
        lk = cls(lock["lock_id"], lock["task"], (lock["target_schema"], lock["target_table"]), st.get("sources", ()),
                 init)
        lk.joined = TableSchema.from_dict(st["joined"]) if st.get("joined") is not None else None
        lk.seq, lk.op_seq = st.get("seq", 0), st.get("op_seq", 0)
        lk.dropped = {c: [tuple(k) for k in who] for c, who in (st.get("dropped") or {}).items()}
        lk.departed = {tuple(k): TableSchema.from_dict(d) for k, d in st.get("departed") or []}
        for r in members:
            lk.members[(r["source_id"], r["upstream_schema"], r["upstream_table"])] = Member.from_json(r["state"])
        lk._restore_ops(ops)
        return lk
