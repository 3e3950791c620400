"""Binlog reading without mysql-replication: dump protocol, event layouts, row decoders.

- ``dump``: one COM_BINLOG_DUMP stream on a pymysql connection, packets framed by hand;
- ``events``: the event header, control events and TABLE_MAP (binlog v4, MySQL + MariaDB);
- ``decode``: one generated row decoder per table (values as mysql-replication yields them);
- ``txn``: what a window delivers (``Txn`` of ``RowChange`` rows, or one DDL);
- ``window``: ``BinlogWindow``, the syncer's reader (held to the mysql-replication oracle in
  ``tests/oracle_binlog.py``).
"""

from dm_core.binlog.window import BinlogWindow

__all__ = ["BinlogWindow"]
