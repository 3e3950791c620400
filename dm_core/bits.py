"""The value of a BIT(n) column as the binlog reader hands it over.

A ``str`` of '0'/'1' digits (what mysql-replication gives, so it compares equal to that), typed
so that the statement renderer writes it as a bit literal (``b'0101'``: a quoted string would be
n bytes long and too long for the column) and expressions read it as the number it is.

>>> b = Bits("00001111"); b == "00001111", b.number
(True, 15)
"""

from __future__ import annotations


class Bits(str):
    __slots__ = ()

    @property
    def number(self) -> int:
        return int(self, 2) if self else 0
