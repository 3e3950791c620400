"""Whether a target column's type holds every value of an upstream column's type.

The precheck asks it of target tables a user created beforehand (``table_schema``'s
``target_types`` item): a value the target cannot hold is refused when it comes (the full
load's chunk fails naming the row, the sync pauses on the downstream's refusal), so a
narrower column is worth knowing before the task starts, not after hours of loading.

Types are information_schema ``COLUMN_TYPE`` texts (``int(11) unsigned``, ``decimal(10,2)``,
``varchar(64)``, ``enum('a','b')``). Only differences that lose or change values are named;
a pair this module does not know is not judged (None), never guessed at.
"""

from __future__ import annotations

import re

_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_TEXT_BYTES = {"tinytext": 255, "text": 65535, "mediumtext": (1 << 24) - 1, "longtext": (1 << 32) - 1,
               "tinyblob": 255, "blob": 65535, "mediumblob": (1 << 24) - 1, "longblob": (1 << 32) - 1}
_TEMPORAL = ("datetime", "timestamp", "time")
_TYPE = re.compile(r"^\s*([a-z]+)\s*(?:\(([^)]*)\))?\s*(.*)$", re.I)


def _parse(t: str) -> tuple[str, list[str], str]:
    m = _TYPE.match(t or "")
    if not m:
        return "", [], ""
    args = [a.strip() for a in (m[2] or "").split(",") if a.strip()]
    return m[1].lower(), args, m[3].lower()


def _int_range(base: str, rest: str) -> tuple[int, int]:
    bits = _INT_BITS[base]
    if "unsigned" in rest:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _decimal(args: list[str]) -> tuple[int, int]:
    """(digits before the point, digits after it) of DECIMAL(M,D); DECIMAL is DECIMAL(10,0)."""
    m = int(args[0]) if args else 10
    d = int(args[1]) if len(args) > 1 else 0
    return m - d, d


def _members(args_text: str) -> list[str]:
    return [m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", args_text)]


def _fsp(args: list[str]) -> int:
    return int(args[0]) if args and args[0].isdigit() else 0


def narrower(up: str, down: str) -> str | None:
    """Why ``down`` may not hold every value of ``up``, or None when it does (or the pair is
    not one this module judges).

    >>> narrower("int(11)", "bigint(20)"), narrower("int(10) unsigned", "int(11)")
    (None, 'int unsigned values above 2147483647 do not fit int')
    >>> narrower("decimal(65,30)", "decimal(38,10)")
    'decimal(65,30) has 35 digits before the point and 30 after; decimal(38,10) has 28 and 10'
    >>> narrower("varchar(255)", "varchar(64)"), narrower("varchar(64)", "text")
    ('varchar(255) is longer than varchar(64)', None)
    >>> narrower("datetime(6)", "datetime"), narrower("double", "float")
    ('datetime(6) keeps 6 fractional digits, datetime 0', 'double values do not fit float exactly')
    >>> narrower("enum('a','b','c')", "enum('a','b')")
    "enum('a','b','c') has a member enum('a','b') lacks: 'c'"
    """
    (ub, ua, ur), (db, da, dr) = _parse(up), _parse(down)
    if not ub or not db:
        return None
    if ub in _INT_BITS and db in _INT_BITS:
        (ulo, uhi), (dlo, dhi) = _int_range(ub, ur), _int_range(db, dr)
        uname, dname = ub + (" unsigned" if "unsigned" in ur else ""), db + (" unsigned" if "unsigned" in dr else "")
        if uhi > dhi:
            return f"{uname} values above {dhi} do not fit {dname}"
        if ulo < dlo:
            return f"{uname} values below {dlo} do not fit {dname}"
        return None
    if ub in ("decimal", "numeric") and db in ("decimal", "numeric"):
        (ui, uf), (di, df) = _decimal(ua), _decimal(da)
        if ui > di or uf > df:
            return (f"{up.strip()} has {ui} digits before the point and {uf} after; "
                    f"{down.strip()} has {di} and {df}")
        return None
    if ub in _INT_BITS and db in ("decimal", "numeric"):
        lo, hi = _int_range(ub, ur)
        digits = len(str(max(hi, -lo)))
        return f"{ub} values of {digits} digits do not fit {down.strip()}" if _decimal(da)[0] < digits else None
    if ub == "double" and db == "float":
        return "double values do not fit float exactly"
    if ub in ("float", "double") and (db in _INT_BITS or db in ("decimal", "numeric")):
        return f"{ub} values lose their fraction or range in {db}"
    if ub in ("char", "varchar", "binary", "varbinary") and db in ("char", "varchar", "binary", "varbinary"):
        if ua and da and int(ua[0]) > int(da[0]):
            return f"{up.strip()} is longer than {down.strip()}"
        return None
    if ub in _TEXT_BYTES and db in _TEXT_BYTES:
        return f"{ub} values longer than {_TEXT_BYTES[db]} bytes do not fit {db}" if _TEXT_BYTES[ub] > _TEXT_BYTES[db] \
            else None
    if ub in ("char", "varchar") and db in _TEXT_BYTES and ua:
        return f"{up.strip()} may need more than {_TEXT_BYTES[db]} bytes" if int(ua[0]) * 4 > _TEXT_BYTES[db] else None
    if ub in _TEXT_BYTES and db in ("char", "varchar", "binary", "varbinary"):
        return f"{ub} values longer than {down.strip()} do not fit it"
    if ub in _TEMPORAL and db == ub:
        if _fsp(ua) > _fsp(da):
            return f"{up.strip()} keeps {_fsp(ua)} fractional digits, {down.strip()} {_fsp(da)}"
        return None
    if ub == "datetime" and db == "timestamp":
        return "datetime values outside 1970-2038 do not fit timestamp"
    if ub in ("datetime", "timestamp") and db == "date":
        return f"{ub} values lose their time of day in date"
    if ub in ("enum", "set") and db == ub:
        lost = [m for m in _members(up) if m not in set(_members(down))]
        return f"{up.strip()} has a member {down.strip()} lacks: {', '.join(repr(m) for m in lost)}" if lost else None
    if ub == "bit" and db == "bit":
        return f"{up.strip()} is wider than {down.strip()}" if _fsp(ua or ["1"]) > _fsp(da or ["1"]) else None
    return None
