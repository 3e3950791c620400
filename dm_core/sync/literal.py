"""Statement text for the DML executors: a ``Stmt``'s ``%s`` placeholders filled with SQL
literals escaped by the driver.

Why not ``cursor.execute(sql, params)``: both drivers build the statement text on the
client anyway (neither has server-side parameters), and both route every value through
two or three Python calls (pymysql ``escape_item`` → encoder → ``escape_string``;
mysqlclient ``literal`` → ``escape`` → encoder). At thousands of rows per second, in the
process that also decodes the binlog, that was a fifth of the incremental phase's CPU
(``make bench``). Here one table lookup by type picks the conversion: numbers go through
C builtins, and every string and byte string through mysqlclient's ``string_literal``,
the C ``mysql_real_escape_string`` of the connection's charset and SQL mode, the same
call its own ``execute`` makes. So values are still escaped by the driver, never pasted.

Value conversions (what ``dml.to_db_value`` means, in literal form):

    int, bool           → digits (bool as 1/0)
    float               → repr (shortest exact); NaN/inf are refused, as by both drivers
    Decimal             → fixed-point digits (never exponent form: 1E+3 would be a DOUBLE)
    str                 → escaped string in the connection charset (utf8mb4)
    bytes, bytearray    → _binary'…' (as pymysql sends them)
    date / datetime     → 'YYYY-MM-DD' / 'YYYY-MM-DD HH:MM:SS[.ffffff]'
    timedelta (TIME)    → '[-]H:MM:SS[.ffffff]'
    dict / list (JSON)  → JSON text (jsondoc.json_text); JsonText (a bare JSON scalar) → as is
    set (SET column)    → comma-joined members
    None                → NULL; anything else → its str(), escaped
"""

from __future__ import annotations

import datetime
import decimal
from typing import Callable

from dm_core.binlog import compiled
from dm_core.bits import Bits
from dm_core.jsondoc import JsonText, json_text
from dm_core.sync.dml import Stmt

# the placeholders filled in C (dm_core/sync/sqltext.pyx) while the compiled build is active
sqltext = compiled.load("sqltext")

Literal = Callable[[object], bytes]

# Multi-row statements are sent in pieces of at most this many bytes, and at most half the
# server's max_allowed_packet (a longer statement is refused, and would be on every retry).
MAX_STATEMENT_BYTES = 8 << 20


class Renderer:
    """Turns ``Stmt``s into statement bytes for one mysqlclient connection."""

    def __init__(self, conn, max_bytes: int | None = None):
        """:param max_bytes: the longest statement to send (default: from the server)."""
        self.packet = _max_packet(conn)   # the longest statement the server accepts
        self.max_bytes = max_bytes or max(64 << 10, min(MAX_STATEMENT_BYTES, self.packet // 2))
        quote = conn.string_literal  # C; str is encoded in the connection charset
        self._quote = quote

        def text(v) -> bytes:
            return quote(str(v))

        def binary(v) -> bytes:
            return b"_binary" + quote(bytes(v))

        def real(v: float) -> bytes:
            r = repr(v)
            if r[-1] in "nf":  # nan, inf, -inf
                raise ValueError(f"{r} cannot be stored in MySQL")
            return r.encode()

        def dec(v: decimal.Decimal) -> bytes:
            return format(v, "f").encode()

        def stamp(v: datetime.datetime) -> bytes:
            if v.tzinfo is not None:  # DATETIME has no zone; the decoder's values are naive
                v = v.replace(tzinfo=None)
            return quote(v.isoformat(" "))

        def day(v) -> bytes:
            return quote(v.isoformat())

        def span(v: datetime.timedelta) -> bytes:
            sign = "-" if v < datetime.timedelta(0) else ""
            v = abs(v)
            secs = v.days * 86400 + v.seconds
            frac = f".{v.microseconds:06d}" if v.microseconds else ""
            return quote(f"{sign}{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}{frac}")

        def doc(v) -> bytes:  # exact: Decimal digits and scale, int digits, shortest float repr
            return quote(json_text(v))

        def members(v) -> bytes:
            return quote(",".join(sorted(v)))

        self._by_type: dict[type, Literal] = {
            int: b"%d".__mod__, bool: b"%d".__mod__, str: quote, float: real, decimal.Decimal: dec,
            bytes: binary, bytearray: binary, datetime.datetime: stamp, datetime.date: day,
            datetime.timedelta: span, dict: doc, list: doc, JsonText: quote, set: members, frozenset: members,
            type(None): lambda v: b"NULL", Bits: lambda v: b"b'" + v.encode() + b"'",
        }
        self._text = text
        self._templates: dict[str, bytes] = {}
        self._pieces: dict[str, tuple[bytes, ...] | None] = {}
        self._c = sqltext.Filler(quote, self._by_type, self.literal, _utf8(conn)) if sqltext is not None else None

    def literal(self, v) -> bytes:
        f = self._by_type.get(type(v))
        if f is None:  # subclasses of the types above, anything else
            for t, g in self._by_type.items():
                if t is not type(None) and isinstance(v, t):
                    return g(v)
            return self._text(v)
        return f(v)

    def render(self, sql: str, params: tuple) -> bytes:
        """One statement: ``sql``'s ``%s`` placeholders filled (``%%`` is a literal %)."""
        if self._c is not None and (parts := self._split(sql)) is not None:
            return self._c.fill(parts, params)
        return self._fill(self._template(sql), params)

    def render_run(self, sql: str, stmts: list[Stmt]) -> list[bytes]:
        """Consecutive statements with the same text ``sql``. Those with a ``shape`` are
        sent as multi-row statements under ``max_bytes``: a run of one-row statements (the
        DML builder's INSERT/REPLACE) becomes one, a merged statement is cut in pieces.
        Anything else goes one by one."""
        shape = stmts[0].shape
        if shape is None:
            return [self.render(sql, s.params) for s in stmts]
        w = shape[1].count("%s")
        if all(len(s.params) == w for s in stmts):
            return self._rows(shape, [s.params for s in stmts])
        return [t for s in stmts for t in self._rows(shape, [s.params[i:i + w] for i in range(0, len(s.params), w)])]

    def _rows(self, shape: tuple[str, str, str], rows: list[tuple]) -> list[bytes]:
        head, row, tail = shape
        if self._c is not None and (parts := self._split(row)) is not None:
            filled = self._c.fill_rows(parts, rows)
        else:
            row_tpl = self._template(row)
            filled = [self._fill(row_tpl, p) for p in rows]
        # head and tail take no values: % () turns %% back into %
        return self._pack(self._template(head) % (), filled, self._template(tail) % ())

    def _pack(self, head: bytes, rows: list[bytes], tail: bytes) -> list[bytes]:
        """head + rows joined by ", " + tail, as few statements as ``max_bytes`` allows."""
        return pack(head, rows, tail, self.max_bytes, b", ")

    def _fill(self, tpl: bytes, params: tuple) -> bytes:
        by_type, lit = self._by_type, self.literal
        return tpl % tuple([f(v) if (f := by_type.get(type(v))) is not None else lit(v) for v in params])

    def _split(self, sql: str) -> tuple[bytes, ...] | None:
        """``sql``'s text around its ``%s`` placeholders, ``%%`` read as ``%`` (None: it has
        another ``%`` directive, which only ``bytes %`` reads)."""
        if sql in self._pieces:
            return self._pieces[sql]
        if len(self._pieces) > 4096:
            self._pieces.clear()
        tpl, parts, cur, i = self._template(sql), [], [], 0
        while (j := tpl.find(b"%", i)) >= 0:
            cur.append(tpl[i:j])
            directive = tpl[j + 1:j + 2]
            if directive == b"s":
                parts.append(b"".join(cur))
                cur = []
            elif directive == b"%":
                cur.append(b"%")
            else:
                parts = None
                break
            i = j + 2
        if parts is not None:
            cur.append(tpl[i:])
            parts.append(b"".join(cur))
        self._pieces[sql] = out = tuple(parts) if parts is not None else None
        return out

    def _template(self, sql: str) -> bytes:
        t = self._templates.get(sql)
        if t is None:
            if len(self._templates) > 4096:
                self._templates.clear()
            t = self._templates[sql] = sql.encode("utf-8")  # bytes %s takes bytes
        return t


def pack(head: bytes, parts: list[bytes], tail: bytes, cap: int, sep: bytes) -> list[bytes]:
    """head + parts joined by ``sep`` + tail, in as few pieces of at most ``cap`` bytes as the
    parts allow (a part longer than ``cap`` goes alone)."""
    fixed = len(head) + len(tail)
    out, cur, size = [], [], fixed
    for r in parts:
        if cur and size + len(r) + len(sep) > cap:
            out.append(head + sep.join(cur) + tail)
            cur, size = [], fixed
        cur.append(r)
        size += len(r) + len(sep)
    out.append(head + sep.join(cur) + tail)
    return out


# connection character sets in which no byte of a multi-byte character is an ASCII byte, so
# escaping byte by byte is exact (sqltext.pyx)
UTF8_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8"})


def _utf8(conn) -> bool:
    try:
        return conn.character_set_name() in UTF8_CHARSETS
    except Exception:  # a connection that cannot say: the driver escapes
        return False


def _max_packet(conn) -> int:
    cur = conn.cursor()
    try:
        cur.execute("SELECT @@max_allowed_packet")
        return int(cur.fetchone()[0])
    except Exception:  # a server without the variable: MySQL's smallest default
        return 4 << 20
    finally:
        cur.close()
