"""A TABLE_MAP compiled: its row decoders, per event kind and present-column bitmaps, cached.

``compile_table`` parses a TABLE_MAP once per process (cached by its bytes) into a
``TableCodec``, whose ``decoder(op, present, present2)`` is the compiled decoder
(``row_plan.py``, ``rowcodec.pyx``) while the build is active, else the generated one
(``decode.generate``). Both yield the same values (``decode.py`` lists them).
"""

from __future__ import annotations

from typing import Callable, Mapping

from dm_core.binlog import decode, row_plan
from dm_core.binlog import events as ev
from dm_core.binlog.decode import BINARY_COLLATION, python_codec

_ifb = int.from_bytes


class TableCodec:
    """A TABLE_MAP compiled: row decoders per (event kind, present-column bitmaps)."""

    __slots__ = ("td", "schema", "table", "mariadb", "ncols", "full", "by_type", "_codec_of", "_decoders")

    def __init__(self, td: ev.TableDef, charsets: Mapping[int, str], mariadb: bool):
        self.td = td
        self.schema = td.schema
        self.table = td.table
        self.mariadb = mariadb
        codecs_by_coll: dict[int | None, str | None] = {}

        def codec_of(coll: int | None) -> str | None:
            if coll not in codecs_by_coll:
                # an id the charset table does not know reads as utf-8, like the library; a name is
                # the schema tracker's charset of a column (``name_by_position``)
                codecs_by_coll[coll] = python_codec(coll if isinstance(coll, str) else
                                                    None if coll is None else charsets.get(coll, "utf8"))
            return codecs_by_coll[coll]
        self._codec_of = codec_of
        self._decoders: dict[tuple, Callable] = {}
        self.ncols = len(td.columns)
        self.full = ((1 << self.ncols) - 1).to_bytes((self.ncols + 7) // 8, "little")  # all columns present
        self.by_type: dict[int, Callable] = {}  # event type → decoder of full row images

    def full_decoder(self, event_type: int, op: str) -> Callable:
        """The decoder for full row images (binlog_row_image=FULL), by event type."""
        fn = self.by_type[event_type] = self.decoder(op, self.full, self.full if op == "update" else None)
        return fn

    def missing(self, present: bytes) -> list[str]:
        """Names of the columns a ROWS event's bitmap leaves out of its images."""
        bits = _ifb(present, "little")
        return [c.name for c in self.td.columns if not bits >> c.index & 1]

    def decoder(self, op: str, present: bytes, present2: bytes | None = None) -> Callable:
        """``op`` insert/update/delete; ``present``/``present2``: the ROWS event's column bitmaps."""
        key = (op, present, present2)
        fn = self._decoders.get(key)
        if fn is None:
            fn = self._decoders[key] = self._compile(op, _ifb(present, "little"),
                                                     _ifb(present2, "little") if present2 else 0)
        return fn

    def _compile(self, op: str, present: int, present2: int) -> Callable:
        args = (self.schema, self.table, self.td.columns, op, present, present2, self._codec_of)
        return row_plan.compiled_decoder(*args) or decode.generate(*args)

    def _generate(self, op: str, present: int, present2: int) -> Callable:
        """The pure-Python decoder, whichever ``_compile`` picks (the tests compare the two)."""
        return decode.generate(self.schema, self.table, self.td.columns, op, present, present2, self._codec_of)


# Least recently used first (dict order), sized to hold every table of a source at once: one that
# cycles through more tables than this compiles each TABLE_MAP again every time it meets it. A
# codec is about 5 KB (16,384: about 90 MB at most); a NO_LOG upstream takes two per table. Too
# small (4,096, cleared when full), a source of 5,000 tables syncs at a tenth of its speed
# (docs/operations.md, "10,000 tables").
_TABLE_CACHE: dict[tuple, TableCodec] = {}
_TABLE_CACHE_MAX = 16_384


def compile_table(body: bytes, charsets: Mapping[int, str], *, mariadb: bool,
                  charsets_key: object = None, tracked=None) -> TableCodec:
    """The codec for one TABLE_MAP body (after table id and flags, without checksum).

    Cached by the body bytes, so the same table seen again (next window, next transaction)
    costs one dict lookup; a changed definition (ALTER TABLE) has different bytes.
    ``tracked``: the schema tracker's table (dm_core/schema_tracker), which names a TABLE_MAP's
    columns by position when the binlog does not (a RENAME COLUMN keeps the bytes: the
    tracked table is part of the key).
    """
    key = (body, mariadb, charsets_key, tracked)
    codec = _TABLE_CACHE.pop(key, None)
    if codec is None:
        if len(_TABLE_CACHE) >= _TABLE_CACHE_MAX:
            del _TABLE_CACHE[next(iter(_TABLE_CACHE))]
        td = ev.parse_table_map(body, mariadb=mariadb)
        if tracked is not None:
            name_by_position(td, tracked)
        codec = TableCodec(td, charsets, mariadb)
    _TABLE_CACHE[key] = codec   # the newest at the end
    return codec


def name_by_position(td: ev.TableDef, tracked) -> None:
    """Give a TABLE_MAP without logged names the tracked table's names, signedness, charsets
    and ENUM/SET members, column by column (the tracker checked that they fit)."""
    for c, t in zip(td.columns, tracked.columns):
        c.name = t.name
        if c.type in ev.NUMERIC_TYPES:
            c.unsigned = t.unsigned
        if t.charset is not None:
            c.collation = BINARY_COLLATION if t.charset == "binary" else t.charset
        if c.type in (ev.T_ENUM, ev.T_SET):
            c.values = t.values
    td.full_metadata = True
