"""Reading SHOW GRANTS: which privileges the checking user holds, at which level.

Only the statement shape is read (privilege list, object, role grants); the rest of each
line, which may hold a password hash, is never kept.

    >>> g = Grants.parse([
    ...     "GRANT RELOAD, BINLOG MONITOR ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*AB'",
    ...     "GRANT SELECT, INSERT ON `shop\\\\_%`.* TO `u`@`%`",
    ...     "GRANT SELECT (`id`), UPDATE ON `db`.`t` TO `u`@`%`",
    ... ])
    >>> g.has("REPLICATION CLIENT"), g.has("REPLICATION SLAVE")
    (True, False)
    >>> g.has("SELECT", "shop_1", "orders"), g.has("SELECT", "shopx1", "orders")
    (True, False)
    >>> g.has("SELECT", "db", "t"), g.has("UPDATE", "db", "t")
    (False, True)
    >>> Grants.parse(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"]).has("REPLICATION SLAVE")
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Spellings that name the same privilege (MariaDB >= 10.5 shows BINLOG MONITOR for
# REPLICATION CLIENT; REPLICA is the newer word for SLAVE in both servers).
_ALIASES = {
    "ALL PRIVILEGES": "ALL",
    "BINLOG MONITOR": "REPLICATION CLIENT",
    "REPLICATION REPLICA": "REPLICATION SLAVE",
}

_IDENT = r"(?:`(?:[^`]|``)*`|\*|[^\s.`]+)"
_GRANT_ON = re.compile(
    rf"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?:(?:TABLE|PROCEDURE|FUNCTION|PACKAGE(?:\s+BODY)?)\s+)?"
    rf"(?P<db>{_IDENT})(?:\.(?P<table>{_IDENT}))?\s+TO\s", re.I | re.S)
_GRANT_ROLE = re.compile(r"^GRANT\s+(?P<roles>.+?)\s+TO\s", re.I | re.S)


def _unquote(ident: str | None) -> str | None:
    if ident is None or ident == "*":
        return None
    if ident.startswith("`"):
        return ident[1:-1].replace("``", "`")
    return ident


def _split_privs(text: str) -> list[str]:
    """Split at commas outside parentheses (column lists)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _norm_priv(p: str) -> str:
    p = " ".join(p.upper().split())
    return _ALIASES.get(p, p)


def _db_pattern(db: str, case_sensitive: bool) -> re.Pattern:
    """A database name in a grant is a LIKE pattern: `_` and `%` are wildcards unless escaped."""
    rx, i = [], 0
    while i < len(db):
        ch = db[i]
        if ch == "\\" and i + 1 < len(db):
            rx.append(re.escape(db[i + 1]))
            i += 2
            continue
        rx.append("." if ch == "_" else ".*" if ch == "%" else re.escape(ch))
        i += 1
    return re.compile("".join(rx) + r"\Z", 0 if case_sensitive else re.I)


@dataclass(frozen=True)
class Grant:
    privs: frozenset[str]        # normalised names; "ALL" for ALL [PRIVILEGES]
    db: str | None               # None: every database (*.*)
    table: str | None            # None: every table of ``db``


@dataclass
class Grants:
    grants: list[Grant] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)      # granted roles: their privileges are not resolved
    case_sensitive: bool = True                         # lower_case_table_names = 0

    @classmethod
    def parse(cls, lines, case_sensitive: bool = True) -> "Grants":
        g = cls(case_sensitive=case_sensitive)
        for line in lines:
            line = line.strip()
            m = _GRANT_ON.match(line)
            if m:
                privs = frozenset(_norm_priv(p) for p in _split_privs(m["privs"]) if "(" not in p)
                if privs and privs != {"PROXY"}:
                    g.grants.append(Grant(privs, _unquote(m["db"]), _unquote(m["table"])))
                continue
            m = _GRANT_ROLE.match(line)
            if m:
                g.roles += [r.strip() for r in _split_privs(m["roles"])]
        return g

    def has(self, priv: str, db: str | None = None, table: str | None = None) -> bool:
        """Whether ``priv`` is held on ``db``.``table`` (None: at the global level)."""
        priv = _norm_priv(priv)
        for gr in self.grants:
            if priv not in gr.privs and "ALL" not in gr.privs:
                continue
            if gr.db is None:
                return True
            if db is None or not _db_pattern(gr.db, self.case_sensitive).match(db):
                continue
            if gr.table is None:
                return True
            if table is not None and (gr.table == table if self.case_sensitive else gr.table.lower() == table.lower()):
                return True
        return False

    def missing(self, privs, db: str | None = None, table: str | None = None) -> list[str]:
        return [p for p in privs if not self.has(p, db, table)]
