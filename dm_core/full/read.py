"""Stage 2, read: which reader takes a chunk's rows from the upstream. Three readers, one
choice (:func:`reader_for`); the default is ``TEXT``:

- ``TEXT`` (text_rows.py, the default): the upstream's own SELECT returns each row as a ready
  LOAD DATA line, routed and column-mapped; an executor pipes the lines into the target
  without looking at a value (write.text_writer);
- ``SNAPSHOT`` (snapshot_read.py over text_rows.py): the same lines, read in a consistent
  snapshot whose binlog position the chunk's marker records: the one chunk of a table
  without a key, where the sync's catch-up takes over from that position exactly;
- ``JDBC`` (jdbc_read.py, its SQL in extract.py): Spark's JDBC source, for ``--read jdbc``,
  the ``staging`` and ``rows`` write modes, and tables whose columns text cannot carry
  (spatial types: the text reader's query is None, see land.py).
"""

from __future__ import annotations

from dm_core.full import snapshot_read

TEXT, SNAPSHOT, JDBC = "text", "snapshot", "jdbc"
DEFAULT = TEXT


def reader_for(write_mode: str, read: str, st, where: str, load_data_ok: bool) -> str:
    """The reader a chunk of ``st`` (predicate ``where``) tries first under ``--write-mode``
    and ``--read`` (``load_data_ok``: the downstream takes LOAD DATA LOCAL)."""
    if write_mode == "load":
        if read != "auto":
            return JDBC
        return SNAPSHOT if snapshot_read.wanted(st, where) else TEXT
    if write_mode == "staging" and not st.key and load_data_ok and snapshot_read.wanted(st, where):
        return SNAPSHOT
    return JDBC
