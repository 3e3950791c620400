"""Passwords out of SQL text before it is logged or shown.

The binlog carries account statements as written (MariaDB logs ``ALTER USER u IDENTIFIED BY
'secret'`` verbatim), and the syncer names the statements it skips; every string literal that
is a password in MySQL/MariaDB's grammar is replaced by ``'***'``.

    >>> redact_sql("ALTER USER 'u'@'%' IDENTIFIED BY 'p''w'")
    "ALTER USER 'u'@'%' IDENTIFIED BY '***'"
    >>> redact_sql("CREATE USER u IDENTIFIED WITH mysql_native_password BY \\"x\\", v IDENTIFIED VIA ed25519 USING PASSWORD('y')")
    "CREATE USER u IDENTIFIED WITH mysql_native_password BY '***', v IDENTIFIED VIA ed25519 USING PASSWORD('***')"
    >>> redact_sql("SET PASSWORD FOR u = PASSWORD('a'); CHANGE MASTER TO MASTER_PASSWORD = 'b'")
    "SET PASSWORD FOR u = PASSWORD('***'); CHANGE MASTER TO MASTER_PASSWORD = '***'"
    >>> redact_sql("ALTER TABLE t ADD COLUMN note varchar(10) DEFAULT 'BY x'")
    "ALTER TABLE t ADD COLUMN note varchar(10) DEFAULT 'BY x'"
"""

from __future__ import annotations

import re

_LIT = r"""(?:'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")"""
_PATTERNS = [
    # IDENTIFIED [WITH plugin] BY 'pw' / IDENTIFIED VIA plugin USING 'pw'
    re.compile(rf"(\bIDENTIFIED\s+(?:(?:WITH|VIA)\s+[\w`'\"]+\s+)?(?:BY|USING|AS)\s+(?:PASSWORD\s+)?){_LIT}", re.I),
    # PASSWORD('pw'), OLD_PASSWORD('pw')
    re.compile(rf"(\b(?:OLD_)?PASSWORD\s*\(\s*){_LIT}", re.I),
    # SET PASSWORD [FOR u] = 'pw'
    re.compile(rf"(\bSET\s+PASSWORD\b[^=]*=\s*){_LIT}", re.I),
    # CHANGE MASTER TO MASTER_PASSWORD = 'pw' (and MySQL's SOURCE_PASSWORD)
    re.compile(rf"(\b(?:MASTER|SOURCE)_PASSWORD\s*=\s*){_LIT}", re.I),
]


def redact_sql(sql: str) -> str:
    for p in _PATTERNS:
        sql = p.sub(lambda m: m.group(1) + "'***'", sql)
    return sql
