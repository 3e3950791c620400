"""Create target schemas and tables from the upstream's own ``SHOW CREATE TABLE``.

The upstream's statement is edited as text (tokens from dm_core/ddl/text.py), so
everything it says survives: prefix index lengths, FULLTEXT/SPATIAL keys, generated
columns, defaults exactly as the server quotes them, charset/collation, comments,
AUTO_INCREMENT, CHECK constraints, table options and partitioning. The edits:

* the name becomes ``IF NOT EXISTS `target_schema`.`target_table```;
* a column that receives a ``partition id`` mapping gets type BIGINT (the instance /
  schema / table bits need 64 bits), keeping its other attributes;
* extract columns (route ``extract-table/schema/source``) are appended as
  ``varchar(255) NOT NULL DEFAULT ''`` and join the primary key and every unique key, so
  rows of different shards with the same id stay apart;
* a foreign key's parent table is routed like any table (DM keeps foreign keys and runs
  with ``foreign_key_checks=0`` downstream, so load order does not matter).

Nothing else is dropped: DM's full phase (dumpling's ``SHOW CREATE TABLE``, executed
downstream) drops nothing either. What the downstream cannot take it refuses when the
statement runs, with the statement in the error.

A merged target (several upstream tables routed to it) is created once. Its members must
agree (compared without their names and AUTO_INCREMENT counters): in pessimistic shard
mode they must be equal, as DM's ``schema_of_shard_tables`` check demands; otherwise a
member whose columns and keys include every other member's (same definitions) is used,
since the others' rows fit it. Anything else is refused with the first difference named,
before any table is created.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from dm_core.db import qi, qt
from dm_core.errors import ErrorCode
from dm_core.full.discover import SourceTable
from dm_core.ddl.collation import database_defaults
from dm_core.ddl.text import Token, tokenize

log = logging.getLogger("shardflow.full")

_TYPE_FLAGS = ("UNSIGNED", "SIGNED", "ZEROFILL")
_AUTO_INC = re.compile(r"\s*\bAUTO_INCREMENT\s*=\s*\d+", re.I)
_UNIQUE_HEADS = (("PRIMARY", "KEY"), ("UNIQUE",))


@dataclass
class Item:
    """One entry of the CREATE TABLE body: a column, a key, a constraint."""

    kind: str          # "column" | "primary" | "unique" | "key" | "foreign" | "other"
    name: str          # column or key name ("" when unnamed)
    text: str


@dataclass
class ShowCreate:
    """``SHOW CREATE TABLE`` split where shardflow edits it."""

    items: list[Item]
    options: str       # everything after the body: ENGINE=..., PARTITION BY ...

    def signature(self) -> tuple:
        """What members of one merged table must agree on."""
        return tuple((i.kind, i.name.lower(), i.text) for i in self.items), _AUTO_INC.sub("", self.options).strip()


def parse_show_create(text: str) -> ShowCreate:
    """Split a ``SHOW CREATE TABLE`` result into body items and table options.

    >>> sc = parse_show_create("CREATE TABLE `t` (\\n  `id` int(11) NOT NULL,\\n  `s` varchar(9) DEFAULT 'a,b',\\n"
    ...                        "  PRIMARY KEY (`id`),\\n  KEY `k` (`s`(4))\\n) ENGINE=InnoDB AUTO_INCREMENT=3")
    >>> [(i.kind, i.name) for i in sc.items], sc.options
    ([('column', 'id'), ('column', 's'), ('primary', 'PRIMARY'), ('key', 'k')], 'ENGINE=InnoDB AUTO_INCREMENT=3')
    """
    toks = tokenize(text)
    open_at = next(i for i, t in enumerate(toks) if t.kind == "punct" and t.text == "(")
    depth, start, items, close = 0, toks[open_at].end, [], None
    for i in range(open_at, len(toks)):
        t = toks[i]
        if t.kind != "punct":
            continue
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
            if depth == 0:
                items.append(text[start:t.start])
                close = t
                break
        elif t.text == "," and depth == 1:
            items.append(text[start:t.start])
            start = t.end
    return ShowCreate([_item(x.strip()) for x in items if x.strip()], text[close.end:].strip())


def _item(text: str) -> Item:
    toks = tokenize(text)
    first = toks[0]
    if first.kind == "ident":
        return Item("column", first.text, text)
    words = [t.text.upper() for t in toks[:3] if t.kind == "word"]
    name = next((t.text for t in toks if t.kind == "ident"), "")
    if words[:2] == ["PRIMARY", "KEY"]:
        return Item("primary", "PRIMARY", text)
    if words[:1] == ["UNIQUE"]:
        return Item("unique", name, text)
    if words[:1] in (["KEY"], ["INDEX"], ["FULLTEXT"], ["SPATIAL"]):
        return Item("key", name, text)
    if words[:1] == ["CONSTRAINT"] and any(t.is_kw("FOREIGN") for t in toks):
        return Item("foreign", name, text)
    return Item("other", name, text)


def _widened(item: Item) -> str:
    """The column definition with its type replaced by ``bigint`` (attributes kept).

    >>> _widened(Item("column", "id", "`id` int(10) unsigned NOT NULL AUTO_INCREMENT"))
    '`id` bigint NOT NULL AUTO_INCREMENT'
    """
    toks = tokenize(item.text)
    i = 1
    end = toks[i].end  # the type's name
    i += 1
    if i < len(toks) and toks[i].text == "(":
        depth = 0
        while i < len(toks):
            if toks[i].text == "(":
                depth += 1
            elif toks[i].text == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        end = toks[i].end
        i += 1
    while i < len(toks) and toks[i].is_kw(*_TYPE_FLAGS):
        end = toks[i].end
        i += 1
    return f"{item.text[:toks[1].start]}bigint{item.text[end:]}"


def _with_key_columns(item: Item, extra: list[str]) -> str:
    """A PRIMARY/UNIQUE key with ``extra`` columns appended to its key parts."""
    toks = tokenize(item.text)
    have = {t.text.lower() for t in toks if t.kind == "ident"}
    add = [c for c in extra if c.lower() not in have]
    if not add:
        return item.text
    open_i = next(i for i, t in enumerate(toks) if t.text == "(" and t.kind == "punct")
    depth = 0
    for t in toks[open_i:]:
        if t.kind != "punct":
            continue
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
            if depth == 0:
                return item.text[:t.start] + "".join(f",{qi(c)}" for c in add) + item.text[t.start:]
    return item.text


def _routed_references(item: Item, schema: str, route) -> str:
    """A foreign key whose parent table is routed (an unqualified parent is in ``schema``)."""
    toks: list[Token] = tokenize(item.text)
    for i, t in enumerate(toks):
        if t.is_kw("REFERENCES") and i + 1 < len(toks):
            a = toks[i + 1]
            if i + 3 < len(toks) and toks[i + 2].text == "." and toks[i + 2].kind == "punct":
                ps, pt, end = a.text, toks[i + 3].text, toks[i + 3].end
            else:
                ps, pt, end = schema, a.text, a.end
            return item.text[:a.start] + qt(*route(ps, pt)) + item.text[end:]
    return item.text


def show_create(up_conn, schema: str, table: str) -> str:
    """The upstream's ``SHOW CREATE TABLE``, with an sql_mode that does not alter it
    (ANSI_QUOTES, NO_TABLE_OPTIONS, NO_KEY_OPTIONS, NO_FIELD_OPTIONS would)."""
    return show_creates(up_conn, [(schema, table)])[0]


def show_creates(up_conn, tables: list[tuple[str, str]]) -> list[str]:
    """``show_create`` of many tables, the session's sql_mode set aside once for all of them
    (three round trips a table less: 500 small tables spent 1.5 s of 7 in them)."""
    with up_conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        mode = cur.fetchone()[0]
        cur.execute("SET SESSION sql_mode = ''")
        try:
            out = []
            for schema, table in tables:
                cur.execute(f"SHOW CREATE TABLE {qt(schema, table)}")
                out.append(cur.fetchone()[1])
            return out
        finally:
            cur.execute("SET SESSION sql_mode = %s", (mode,))


def create_table_sql(sc: ShowCreate, member: SourceTable, widen: set[str], route=None) -> str:
    """The target's CREATE TABLE from a member's parsed SHOW CREATE TABLE."""
    route = route or (lambda s, t: (s, t))
    extract = list(member.extract)
    widen_l = {c.lower() for c in widen}
    cols, rest = [], []
    for it in sc.items:
        if it.kind == "column":
            cols.append(_widened(it) if it.name.lower() in widen_l else it.text)
        elif it.kind in ("primary", "unique") and extract:
            rest.append(_with_key_columns(it, extract))
        elif it.kind == "foreign":
            rest.append(_routed_references(it, member.schema, route))
        else:
            rest.append(it.text)
    have = {it.name.lower() for it in sc.items if it.kind == "column"}
    cols += [f"{qi(c)} varchar(255) NOT NULL DEFAULT ''" for c in extract if c.lower() not in have]
    body = ",\n  ".join(cols + rest)
    return (f"CREATE TABLE IF NOT EXISTS {qt(member.target_schema, member.target_table)} (\n  {body}\n) "
            f"{sc.options}").rstrip()


def _difference(a: tuple[SourceTable, ShowCreate], b: tuple[SourceTable, ShowCreate]) -> str:
    (sa, ca), (sb, cb) = a, b
    na, nb = qt(sa.schema, sa.table), qt(sb.schema, sb.table)
    ia = {(i.kind, i.name.lower()): i for i in ca.items}
    ib = {(i.kind, i.name.lower()): i for i in cb.items}
    for k, i in ia.items():
        what = f"{'column' if k[0] == 'column' else 'key'} `{i.name}`" if i.name else f"`{i.text}`"
        if k not in ib:
            return f"{what} is in {na} ({sa.source_id}) but not in {nb} ({sb.source_id})"
        if ib[k].text != i.text:
            return (f"{what} is {_definition(i)} in {na} ({sa.source_id}) but {_definition(ib[k])} in {nb} "
                    f"({sb.source_id})")
    for k, i in ib.items():
        if k not in ia:
            what = f"{'column' if k[0] == 'column' else 'key'} `{i.name}`" if i.name else f"`{i.text}`"
            return f"{what} is in {nb} ({sb.source_id}) but not in {na} ({sa.source_id})"
    if [i.name.lower() for i in ca.items] != [i.name.lower() for i in cb.items]:
        return f"the columns are in another order in {na} ({sa.source_id}) than in {nb} ({sb.source_id})"
    return (f"the table options differ: `{ca.options}` in {na} ({sa.source_id}), "
            f"`{cb.options}` in {nb} ({sb.source_id})")


def _definition(i: Item) -> str:
    """A column's definition without its name; a key's whole text."""
    return i.text[tokenize(i.text)[0].end:].strip() if i.kind == "column" else i.text


def _covers(big: ShowCreate, small: ShowCreate) -> bool:
    have = {(i.kind, i.name.lower(), i.text) for i in big.items}
    return all((i.kind, i.name.lower(), i.text) in have for i in small.items)


def pick_definition(members: list[tuple[SourceTable, ShowCreate]], *, exact: bool):
    """The member whose definition the merged target gets (see the module docstring);
    raises naming the first difference when there is none."""
    first = members[0]
    sig = first[1].signature()
    if all(m[1].signature() == sig for m in members[1:]):
        return first
    if not exact:
        for cand in members:
            if all(_covers(cand[1], m[1]) for m in members):
                return cand
    other = next(m for m in members[1:] if m[1].signature() != sig)
    st = first[0]
    why = ("pessimistic shard mode needs every shard table to be the same" if exact else
           "no shard table has every other shard table's columns and keys")
    raise ErrorCode.PRECHECK_FAILED.error(
        f"cannot create merged target {qt(st.target_schema, st.target_table)}: {why}; {_difference(first, other)}",
        workaround="Make the shard tables' definitions equal upstream. If a DDL is running on the shards right "
                   "now, rerun the full phase once every shard has it (the low watermark is kept).")


def database_options(up_conn, schema: str) -> str:
    """`` CHARACTER SET x COLLATE y``: the upstream database's defaults, for its target ('' if
    the upstream does not say)."""
    got = database_defaults(up_conn, schema)
    if got is None:
        return ""
    cs, coll = got
    return f" CHARACTER SET {qi(cs)}" + (f" COLLATE {qi(coll)}" if coll else "")


def ensure_databases(down_conn, schemas: list[tuple[object, str, str]]) -> list[str]:
    """Create every missing target database of ``schemas`` (upstream connection, upstream
    database, target database), with the upstream database's charset: an allowed database
    without tables exists downstream too, as after DM's dump. Returns the targets."""
    done = []
    with down_conn.cursor() as cur:
        for up_conn, schema, target in schemas:
            if target.lower() in (d.lower() for d in done):
                continue
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {qi(target)}{database_options(up_conn, schema)}")
            done.append(target)
    return done


_NAMED_HEAD = re.compile(r"\ACREATE TABLE `(?:[^`]|``)+` ")


def _parse_once(text: str, parsed: dict) -> ShowCreate:
    """``parse_show_create(text)``, once per body: shards and many small tables share one
    definition under different names (10,000 parses were 10 s of a full phase's prepare). The
    result names no table, and its readers only read it."""
    head = _NAMED_HEAD.match(text)
    body = text[head.end():] if head else text
    got = parsed.get(body)
    if got is None:
        got = parsed[body] = parse_show_create(text)
    return got


def ensure_targets(down_conn, members: list[tuple[object, SourceTable]], mapped_columns, *,
                   routes=None, exact: bool = False, connect_down=None, threads: int = 4) -> list[str]:
    """Create every missing target schema/table. ``members`` pairs an upstream connection
    with a table; ``mapped_columns(st)`` names columns that get a partition id;
    ``routes(st)`` is the table router of ``st``'s source (foreign keys' parents);
    ``exact``: members of a merged target must be equal (pessimistic shard mode).
    ``connect_down()``: more downstream connections (as ``down_conn``: foreign key checks off),
    so ``threads`` CREATE TABLEs run at once (each one creates a file downstream; hundreds of
    small tables took 25 ms each one after another)."""
    from concurrent.futures import ThreadPoolExecutor

    texts: dict[int, str] = {}
    ups = list({id(c): c for c, _ in members}.values())

    def read(up_conn):   # one thread per upstream: each reads its own server's definitions
        sts = [st for c, st in members if c is up_conn]
        return zip(map(id, sts), show_creates(up_conn, [(st.schema, st.table) for st in sts]))

    with ThreadPoolExecutor(max_workers=max(1, len(ups)), thread_name_prefix="show-create") as ex:
        for got in ex.map(read, ups):
            texts.update(got)
    groups: dict[tuple[str, str], list[tuple[SourceTable, ShowCreate]]] = {}
    parsed: dict[str, ShowCreate] = {}
    for _, st in members:
        tkey = (st.target_schema.lower(), st.target_table.lower())
        groups.setdefault(tkey, []).append((st, _parse_once(texts[id(st)], parsed)))
    chosen = [pick_definition(g, exact=exact) for g in groups.values()]  # every refusal before any CREATE
    conn_of = {id(st): up for up, st in members}
    databases: dict[str, str] = {}   # target database (lower case) -> its CREATE, from its first table
    for st, _ in chosen:
        # a table created later without a charset inherits its database's, as upstream
        if st.target_schema.lower() not in databases:
            databases[st.target_schema.lower()] = (f"CREATE DATABASE IF NOT EXISTS {qi(st.target_schema)}"
                                                   f"{database_options(conn_of[id(st)], st.schema)}")
    statements = [(f"{st.target_schema}.{st.target_table}",
                   create_table_sql(sc, st, mapped_columns(st), routes(st) if routes else None)) for st, sc in chosen]
    with down_conn.cursor() as cur:
        for sql in databases.values():
            cur.execute(sql)
        if connect_down is None or threads <= 1 or len(statements) < 2 * threads:
            for _, sql in statements:
                cur.execute(sql)
            return [name for name, _ in statements]
    _create_at_once(connect_down, [sql for _, sql in statements], threads)
    return [name for name, _ in statements]


def _create_at_once(connect_down, statements: list[str], threads: int) -> None:
    """Run ``statements`` on ``threads`` connections of their own; the first error is raised
    once every thread stopped (statements after it on the failing thread are not run)."""
    from concurrent.futures import ThreadPoolExecutor

    parts = [statements[i::threads] for i in range(threads)]

    def run(part):
        conn = connect_down()
        try:
            with conn.cursor() as cur:
                for sql in part:
                    cur.execute(sql)
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create-targets") as ex:
        for f in [ex.submit(run, p) for p in parts if p]:
            f.result()
