"""Where a stream stands in a source's binlog: a leaf module, so the binlog reader, the
syncer, shard DDL and the state store can all name a position without importing each other.
"""

from __future__ import annotations


_FILE_NO: dict[str, int] = {}   # binlog file name → its number, for Position.key


class Position:
    """A binlog position between two transactions.

    ``gtid`` is the GTID state after the transactions before it, when known. It does not
    take part in equality: the same place in the binlog is the same position whether or
    not the reader knew the GTID state there.

    A plain slotted class rather than a frozen dataclass: the binlog reader makes one per
    transaction, and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field)
    was a measurable share of the incremental phase. Treat instances as immutable.
    """

    __slots__ = ("file", "pos", "gtid")

    def __init__(self, file: str, pos: int, gtid: str | None = None):
        self.file = file
        self.pos = pos
        self.gtid = gtid

    def __eq__(self, other) -> bool:
        return isinstance(other, Position) and self.file == other.file and self.pos == other.pos

    def __hash__(self) -> int:
        return hash((self.file, self.pos))

    def __repr__(self) -> str:
        return f"Position(file={self.file!r}, pos={self.pos!r}, gtid={self.gtid!r})"

    def key(self) -> tuple[int, int]:
        # mysql-bin.000012 → 12: binlog files sort by their numeric suffix. Looked up: the syncer
        # asks several times per transaction, and parsing the name was most of the call.
        n = _FILE_NO.get(self.file)
        if n is None:
            if len(_FILE_NO) > 4096:
                _FILE_NO.clear()
            n = _FILE_NO[self.file] = int(self.file.rsplit(".", 1)[-1])
        return (n, self.pos)

    def __str__(self) -> str:
        return f"({self.file}, {self.pos})"
