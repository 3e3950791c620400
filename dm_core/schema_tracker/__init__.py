"""The schema tracker: each upstream table's columns as they stood at every binlog position.

Why: a row event names its columns only when the upstream logs them
(``binlog_row_metadata=FULL``), which MySQL 5.6/5.7 cannot do and MySQL 8.0 and MariaDB do not
do by default. Without names a row is a run of values by position; the tracker supplies each
position's name, signedness, character set and ENUM/SET members, as DM's schema tracker does.

Design (one module per job):

- ``table.py``: ``TrackedTable``, the decoding view of one table (columns in order, the table's
  default charset), read from information_schema or a CREATE TABLE, and checked against a
  TABLE_MAP (column count and each column's binlog type) before it is trusted;
- ``evolve.py``: one DDL statement applied to the tables it changes (CREATE, CREATE ... LIKE,
  ALTER: ADD/DROP/MODIFY/CHANGE/RENAME COLUMN with FIRST/AFTER, charset changes, RENAME,
  DROP); a statement it cannot follow marks its tables *stale*;
- ``store.py``: the versions in the state store (table ``schema_tracker``);
- ``tracker.py``: ``SchemaTracker``, the versions of one (task, source) keyed by binlog
  position. A version is written when the binlog reader meets its DDL, before any row after
  it is decoded and so before a checkpoint can pass it; a lookup at position P takes the
  newest version at or before P. A restart, a safe-mode replay, a shard-DDL rewind or a
  re-read window therefore decodes every row with the schema of its own position, and a DDL
  met again computes and writes the same version again (idempotent by construction).

Seeding: a table first met without a version, or stale, is read from the upstream's
information_schema as it is now and written at that position. That is right unless a DDL on
the table still lies ahead in the binlog; every use is checked against the TABLE_MAP, so such
a seed that does not fit pauses the source naming both sides, and ``dmctl binlog-schema``
lets an operator set the table by hand.
"""
