"""Binlog reading without mysql-replication: dump protocol, event layouts, row decoders.

- ``dump``: one COM_BINLOG_DUMP stream on a pymysql connection, packets framed by hand;
- ``events``: the event header, control events and TABLE_MAP (binlog v4, MySQL + MariaDB);
- ``decode``: the values of row images, and one generated row decoder per table (values as
  mysql-replication yields them); ``codec``: a TABLE_MAP's decoders, cached; ``row_plan``: the
  compiled decoder's plan (``rowcodec.pyx``);
- ``txn``: what a window delivers (``Txn`` of ``RowChange`` rows, or one DDL);
- ``window``: ``BinlogWindow``, the syncer's reader (held to the mysql-replication oracle in
  ``tests/oracle_binlog.py``);
- ``compiled``: ``window`` and ``dump`` compiled with Cython, with ``rowcodec.pyx``,
  ``dm_core/sync/sqltext.pyx`` and ``dm_core/sync/jobplan.pyx``, loaded instead of the pure-Python paths
  while the build matches them (``make setup`` builds it).
"""

from dm_core.binlog import compiled

compiled.activate(__path__)

from dm_core.binlog.window import BinlogWindow  # noqa: E402  (after the build is on __path__)

__all__ = ["BinlogWindow"]
