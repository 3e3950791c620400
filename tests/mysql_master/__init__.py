"""A MySQL-flavoured master for tests: no MySQL server runs on these machines (only MariaDB),
so this package impersonates MySQL 5.7 / 8.0 / 8.4 well enough for shardflow's real binlog
reader and precheck to run end to end against it.

- ``encoder.BinlogBuilder``: MySQL binlog files (bytes) from transactions given in Python;
- ``server.MysqlMaster``: a TCP server speaking the MySQL protocol (handshake, both default
  auth plugins, COM_QUERY, COM_BINLOG_DUMP[_GTID]) that serves those files, answers the
  statements where MySQL differs from MariaDB itself (``answers.py``), and relays the rest
  to a backing MariaDB holding the same schemas.

Module map: protocol (packets), auth (password checks), flavours (per-version facts),
variables (system variables overlay), answers (statement table), backing (relay), session
(one connection), dump (binlog sender), encoder/events/tablemap/columns/values/jsonbin
(binlog encoding), gtidset (GTID sets), showevents (SHOW BINLOG EVENTS).
"""

from tests.mysql_master.encoder import BinlogBuilder, Mark
from tests.mysql_master.jsonbin import JSON_NULL
from tests.mysql_master.server import MysqlMaster

__all__ = ["BinlogBuilder", "JSON_NULL", "Mark", "MysqlMaster"]
