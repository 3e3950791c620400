"""Randomized, seeded schema evolution + DML through the incremental (binlog) sync, with
stops and starts (a new Syncer object, or a runner process SIGKILLed mid-window) in between.

Each seed creates a few tables of varied column types upstream (one schema), starts the task
(task-mode all, nothing copied: the tables start empty), then runs a random sequence of
statements generated from the upstream's current catalog (information_schema), so that they
are valid; a statement MariaDB refuses is logged as skipped and is not a finding. Every few
steps part of the binlog is synced. At the end the source is synced until caught up, and:

* the source is not paused (a pause on DDL MariaDB accepted is a finding);
* the downstream has the same tables, each with the upstream's SHOW CREATE TABLE (names and
  AUTO_INCREMENT aside);
* every table's rows equal the upstream's (here, and by ``compare_task``).

On failure the seed and the statement log are printed. The short cases at the end are the
minimal reproductions of what the random runs found.
"""

from __future__ import annotations

import os
import random
import re
import time
import types
from pathlib import Path

import pytest

from dm_core.config.task import parse_task
from dm_core.db import connect, qi, qt
from dm_core.full.phase import finish, prepare
from dm_core.reset import reset_task
from dm_core.state import StateStore
from dm_core.sync.syncer import Syncer
from dm_core.validate.compare import compare_task, render

from .helpers import drop_schemas, one_source_task, register
from .helpers import run_sql as run

pytestmark = pytest.mark.integration

TEXTS = ["naïve café", "数据迁移", "Ünïcödé ✓", "emoji 🚀🔥", "", "plain", "a'quote", "back\\slash", "tab\tnl\n"]
LATIN = ["café", "plain", "", "a'quote", "Ü", "x y z"]
KEYTEXTS = ["k1", "k2", "k3", "ä4", "k5", "日6"]


# ---- catalog -------------------------------------------------------------------------------------
def q(conn, sql, args=()):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return [tuple(r) for r in cur.fetchall()]


class Col:
    def __init__(self, row):
        (self.name, self.data_type, self.column_type, self.nullable, self.default, self.extra, self.maxlen,
         self.charset, self.prec, self.scale) = row
        self.nullable = self.nullable == "YES"
        self.data_type = self.data_type.lower()
        self.column_type = self.column_type.lower()

    @property
    def generated(self):
        return "generated" in (self.extra or "").lower()

    @property
    def is_int(self):
        return self.data_type in ("tinyint", "smallint", "mediumint", "int", "bigint")


def catalog(conn, db):
    tables = {}
    for (t,) in q(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_TYPE = 'BASE TABLE' ORDER BY 1", (db,)):
        cols = [Col(r) for r in q(conn, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, "
                                        "EXTRA, CHARACTER_MAXIMUM_LENGTH, CHARACTER_SET_NAME, NUMERIC_PRECISION, "
                                        "NUMERIC_SCALE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                                        "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, t))]
        idx = {}
        for name, col, nonu in q(conn, "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
                                       "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                                 (db, t)):
            idx.setdefault(name, (int(nonu) == 0, []))[1].append(col)
        tables[t] = types.SimpleNamespace(name=t, cols=cols, idx=idx)
    return tables


def key_cols(t) -> list[str]:
    if "PRIMARY" in t.idx:
        return t.idx["PRIMARY"][1]
    for name, (uniq, cols) in sorted(t.idx.items()):
        if uniq:
            return cols
    return []


def indexed(t) -> set[str]:
    return {c for _, cols in t.idx.values() for c in cols}


# ---- values --------------------------------------------------------------------------------------
def value(rnd, c: Col, conn, key=False) -> str:
    """A SQL literal for column ``c`` (mostly valid; an invalid one is refused and skipped)."""
    if c.nullable and not key and rnd.random() < 0.12:
        return "NULL"
    dt = c.data_type
    if c.is_int:
        if key:
            return str(rnd.randint(1, 40))
        hi = {"tinyint": 127, "smallint": 32767, "mediumint": 8388607, "int": 2147483647}.get(dt, 2 ** 62)
        if "unsigned" in c.column_type:
            return str(rnd.choice([0, 1, rnd.randint(0, hi), hi * (2 if dt != "bigint" else 1)]))
        return str(rnd.choice([0, -1, rnd.randint(-1000, 1000), hi, -hi]))
    if dt == "decimal":
        p, s = int(c.prec), int(c.scale)
        whole = 10 ** (p - s) - 1
        v = rnd.choice([0, rnd.uniform(-whole, whole), whole])
        return f"{v:.{s}f}" if s else str(int(v))
    if dt in ("double", "float"):
        return rnd.choice(["0", "1.5", "-2.25", "1e10", "3.0625"])
    if dt in ("varchar", "char", "text", "mediumtext", "tinytext"):
        pool = KEYTEXTS if key else (LATIN if c.charset == "latin1" else TEXTS)
        s = rnd.choice(pool)
        if not key and rnd.random() < 0.3:
            s = s + "-" + str(rnd.randint(0, 999))
        s = s[: int(c.maxlen or 10)]
        return conn.escape(s)
    if dt == "longtext":  # json (MariaDB's JSON is LONGTEXT with a json_valid check)
        import json

        v = rnd.choice([{"a": rnd.randint(0, 9), "b": [1, "x"]}, [1, 2, 3], {"ü": "数据", "n": None}, "s", 12])
        return conn.escape(json.dumps(v, ensure_ascii=False))
    if dt in ("blob", "varbinary", "binary", "mediumblob", "tinyblob"):
        b = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, min(12, int(c.maxlen or 12)))))
        return "0x" + b.hex() if b else "''"
    if dt == "datetime":
        return rnd.choice(["'2024-01-02 03:04:05.123456'", "'1999-12-31 23:59:59.999999'",
                           f"'2030-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} 12:00:00'"])
    if dt == "timestamp":
        return rnd.choice(["'2024-01-02 03:04:05.123456'", "'2001-06-30 12:00:00'", "'2037-01-01 00:00:01.5'"])
    if dt == "date":
        return rnd.choice(["'2024-02-29'", "'1970-01-01'", "'2099-12-31'"])
    if dt == "time":
        return rnd.choice(["'12:34:56'", "'-01:00:00'", "'838:59:59'"])
    if dt == "enum":
        opts = re.findall(r"'((?:[^']|'')*)'", c.column_type)
        return conn.escape(rnd.choice(opts))
    if dt == "set":
        opts = re.findall(r"'((?:[^']|'')*)'", c.column_type)
        return conn.escape(",".join(sorted(set(rnd.sample(opts, rnd.randint(0, len(opts)))), key=opts.index)))
    if dt == "year":
        return str(rnd.randint(1990, 2030))
    return "NULL"


# ---- the workload --------------------------------------------------------------------------------
BASE_TABLES = [
    "CREATE TABLE t1 (id bigint unsigned NOT NULL PRIMARY KEY, a int NOT NULL DEFAULT 0, "
    "d decimal(12,3) NULL, s varchar(40) CHARACTER SET utf8mb4 NULL, dt datetime(6) NULL, "
    "ts timestamp(6) NULL DEFAULT NULL, e enum('x','y','z') NOT NULL DEFAULT 'x', st set('p','q','r') NULL, "
    "j json NULL, b blob NULL, n int NULL, KEY i_a (a))",
    "CREATE TABLE t2 (k1 int NOT NULL, k2 varchar(20) NOT NULL, v varchar(30) NOT NULL DEFAULT 'dflt', "
    "w decimal(8,2) NOT NULL DEFAULT 1.50, m mediumtext NULL, PRIMARY KEY (k1, k2))",
    "CREATE TABLE t3 (u int NULL, x varchar(16) CHARACTER SET latin1 NULL, y bigint NOT NULL DEFAULT 7, "
    "z date NULL, UNIQUE KEY uq_u (u))",
]

COL_TYPES = [
    "int", "int NOT NULL DEFAULT 3", "bigint unsigned NULL", "decimal(10,2) NOT NULL DEFAULT 0.00",
    "varchar(24) NULL", "varchar(24) CHARACTER SET latin1 NULL", "varchar(12) NOT NULL DEFAULT 'd é'",
    "datetime(6) NULL", "timestamp(3) NULL DEFAULT NULL", "date NOT NULL DEFAULT '2020-01-01'",
    "enum('a','b') NOT NULL DEFAULT 'b'", "set('s1','s2') NULL", "json NULL", "blob NULL",
    "text NULL", "tinyint NOT NULL DEFAULT -1", "double NULL", "time NULL",
]


class Workload:
    def __init__(self, seed: int, conn, db: str):
        self.rnd = random.Random(seed)
        self.conn, self.db = conn, db
        self.log: list[str] = []
        self.n = 0
        self.odd = 0.35  # share of ALTER clauses in MariaDB's own / less common syntax

    def cat(self):
        return catalog(self.conn, self.db)

    def exec(self, *stmts, txn=None) -> bool:
        """Run statements; a refused one is logged as skipped. ``txn``: 'commit' | 'rollback'."""
        ok = True
        with self.conn.cursor() as cur:
            if txn:
                cur.execute("BEGIN")
                self.log.append("BEGIN")
            for s in stmts:
                try:
                    cur.execute(s)
                    self.log.append(s + ";")
                except Exception as e:  # noqa: BLE001 - MariaDB refused it: not a finding
                    ok = False
                    self.log.append(f"-- skipped ({str(e.args[-1])[:80]}): {s}")
            if txn:
                cur.execute(txn.upper())
                self.log.append(txn.upper() + ";")
        return ok

    def fresh(self, p):
        self.n += 1
        return f"{p}{self.n}"

    # -- DML --
    def writable(self, t):
        return [c for c in t.cols if not c.generated]

    def row_values(self, t, cols):
        keys = set(key_cols(t)) | {c for u, cs in t.idx.values() if u for c in cs}
        return "(" + ", ".join(value(self.rnd, c, self.conn, key=c.name in keys) for c in cols) + ")"

    def insert_cols(self, t):
        cols = self.writable(t)
        keys = set(key_cols(t))
        return [c for c in cols if c.name in keys or not (c.nullable or c.default is not None)
                or self.rnd.random() < 0.8]

    def key_where(self, t):
        keys = key_cols(t)
        byname = {c.name: c for c in t.cols}
        if not keys or self.rnd.random() < 0.25:
            c = self.rnd.choice(self.writable(t))
            return f"{qi(c.name)} {'IS NULL' if self.rnd.random() < 0.2 else '= ' + value(self.rnd, c, self.conn, key=True)}"
        return " AND ".join(f"{qi(k)} = {value(self.rnd, byname[k], self.conn, key=True)}" for k in keys)

    def dml(self, t) -> list[str]:
        rnd = self.rnd
        name = qi(t.name)
        r = rnd.random()
        cols = self.insert_cols(t)
        clist = ", ".join(qi(c.name) for c in cols)
        writable = self.writable(t)
        if r < 0.3:
            n = rnd.choice([1, 1, 2, 5])
            verb = rnd.choice(["INSERT", "INSERT", "INSERT IGNORE", "REPLACE"])
            return [f"{verb} INTO {name} ({clist}) VALUES " + ", ".join(self.row_values(t, cols) for _ in range(n))]
        if r < 0.4:
            c = rnd.choice(writable)
            return [f"INSERT INTO {name} ({clist}) VALUES {self.row_values(t, cols)} ON DUPLICATE KEY UPDATE "
                    f"{qi(c.name)} = {value(rnd, c, self.conn)}"]
        if r < 0.65:
            sets = rnd.sample(writable, min(len(writable), rnd.randint(1, 3)))
            keys = set(key_cols(t))
            body = ", ".join(f"{qi(c.name)} = {value(rnd, c, self.conn, key=c.name in keys)}" for c in sets)
            lim = " LIMIT 3" if rnd.random() < 0.3 else ""
            return [f"UPDATE {name} SET {body} WHERE {self.key_where(t)}{lim}"]
        if r < 0.75:  # primary key update
            keys = [c for c in t.cols if c.name in key_cols(t)]
            if keys:
                k = rnd.choice(keys)
                if k.is_int:
                    return [f"UPDATE {name} SET {qi(k.name)} = {qi(k.name)} + {rnd.randint(1, 5)} WHERE "
                            f"{qi(k.name)} = {value(rnd, k, self.conn, key=True)}"]
                return [f"UPDATE {name} SET {qi(k.name)} = {value(rnd, k, self.conn, key=True)} WHERE "
                        f"{self.key_where(t)}"]
        if r < 0.85:
            return [f"DELETE FROM {name} WHERE {self.key_where(t)}"]
        return [f"UPDATE {name} SET {qi(writable[-1].name)} = {value(rnd, writable[-1], self.conn)} LIMIT 4"]

    # -- DDL --
    def coldef(self, name=None):
        return f"{qi(name or self.fresh('c'))} {self.rnd.choice(COL_TYPES)}"

    def where(self, t):
        r = self.rnd.random()
        if r < 0.15:
            return " FIRST"
        if r < 0.45:
            return f" AFTER {qi(self.rnd.choice(t.cols).name)}"
        return ""

    def alter_clause(self, t) -> str | None:
        rnd = self.rnd
        cols = [c for c in t.cols if not c.generated]
        nonkey = [c for c in t.cols if c.name not in indexed(t)]
        ints = [c for c in cols if c.is_int]
        if rnd.random() < self.odd:
            return self.odd_clause(t, cols, nonkey)
        r = rnd.random()
        if r < 0.22:
            return f"ADD COLUMN {self.coldef()}{self.where(t)}"
        if r < 0.28 and ints:
            src = rnd.choice(ints)
            kind = rnd.choice(["VIRTUAL", "STORED", "PERSISTENT"])
            return (f"ADD COLUMN {qi(self.fresh('g'))} bigint AS ({qi(src.name)} * 2 + 1) {kind}{self.where(t)}")
        if r < 0.38 and len(nonkey) > 1:
            return f"DROP COLUMN {qi(rnd.choice(nonkey).name)}"
        if r < 0.50 and cols:
            c = rnd.choice(cols)
            wide = widen(c, rnd)
            if wide is None:
                return None
            if rnd.random() < 0.5:
                return f"MODIFY COLUMN {qi(c.name)} {wide}"
            return f"CHANGE COLUMN {qi(c.name)} {qi(self.fresh('r'))} {wide}"
        if r < 0.58 and cols:
            return f"RENAME COLUMN {qi(rnd.choice(cols).name)} TO {qi(self.fresh('rn'))}"
        if r < 0.66 and cols:
            c = rnd.choice(cols)
            part = "(8)" if c.data_type in ("varchar", "text", "blob", "longtext", "mediumtext") else ""
            if c.data_type in ("longtext", "blob", "text", "mediumtext") and rnd.random() < 0.5:
                return None
            kind = "UNIQUE INDEX" if rnd.random() < 0.3 else "INDEX"
            return f"ADD {kind} {qi(self.fresh('ix'))} ({qi(c.name)}{part})"
        if r < 0.72:
            drop = [n for n in t.idx if n != "PRIMARY"]
            if drop:
                return f"DROP INDEX {qi(rnd.choice(drop))}"
            return None
        if r < 0.80 and cols:
            c = rnd.choice(cols)
            if c.data_type in ("blob", "text", "longtext", "mediumtext", "json"):
                return None
            if rnd.random() < 0.5:
                return f"ALTER COLUMN {qi(c.name)} DROP DEFAULT"
            return f"ALTER COLUMN {qi(c.name)} SET DEFAULT {value(rnd, c, self.conn)}"
        if r < 0.86:
            return f"COMMENT = {self.conn.escape(rnd.choice(['hello', 'über', 'it''s']))}"
        if r < 0.90:
            return rnd.choice(["CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
                               "CONVERT TO CHARACTER SET utf8mb4", "DEFAULT CHARSET = latin1"])
        if r < 0.92 and cols:
            c = rnd.choice([c for c in cols if c.data_type in ("varchar", "char")] or [None])
            if c is None:
                return None
            return (f"MODIFY {qi(c.name)} varchar({int(c.maxlen) + 10}) CHARACTER SET utf8mb4 "
                    f"COLLATE utf8mb4_bin{' NULL' if c.nullable else ' NOT NULL'}")
        return self.odd_clause(t, cols, nonkey)

    def odd_clause(self, t, cols, nonkey) -> str | None:
        """MariaDB's own syntax and the less common clauses."""
        rnd = self.rnd
        r = rnd.random()
        if r < 0.10:
            return f"ADD COLUMN IF NOT EXISTS {self.coldef(rnd.choice(cols).name if rnd.random() < 0.5 else None)}"
        if r < 0.18 and nonkey:
            return f"DROP COLUMN IF EXISTS {qi(rnd.choice(nonkey + [Col(('nope',) + ('',) * 9)]).name)}"
        if r < 0.26:
            return f"ADD COLUMN ({self.coldef()}, {self.coldef()})"
        if r < 0.32:
            drop = [n for n in t.idx if n != "PRIMARY"]
            if drop:
                return f"RENAME INDEX {qi(rnd.choice(drop))} TO {qi(self.fresh('ri'))}"
        if r < 0.38 and cols:
            c = rnd.choice(cols)
            return f"ADD INDEX IF NOT EXISTS {qi(self.fresh('ix'))} ({qi(c.name)}{'(4)' if c.data_type in ('varchar', 'text', 'blob', 'longtext', 'mediumtext') else ''})"
        if r < 0.44:
            ints = [c for c in cols if c.is_int]
            if ints:
                return f"ADD CONSTRAINT {qi(self.fresh('ck'))} CHECK ({qi(rnd.choice(ints).name)} > -100000000000)"
        if r < 0.50 and "PRIMARY" in t.idx:
            return "DROP PRIMARY KEY"
        if r < 0.56 and "PRIMARY" not in t.idx:
            c = rnd.choice([c for c in cols if not c.nullable] or cols)
            return f"ADD PRIMARY KEY ({qi(c.name)})"
        if r < 0.62 and nonkey:
            c = rnd.choice(nonkey)
            w = widen(c, rnd)
            if w:
                return f"MODIFY {qi(c.name)} {w} INVISIBLE"
        if r < 0.68:
            return rnd.choice(["ENGINE = InnoDB", "FORCE", "ROW_FORMAT = DYNAMIC", "AUTO_INCREMENT = 1000",
                               "ALGORITHM = INPLACE, LOCK = NONE, ADD COLUMN " + self.coldef()])
        if r < 0.74:
            return f"ADD COLUMN {qi(self.fresh('x'))} int NOT NULL DEFAULT (1 + 2){self.where(t)}"
        if r < 0.80 and cols:
            c = rnd.choice(cols)
            return f"CHANGE COLUMN IF EXISTS {qi(c.name)} {qi(self.odd_name())} {widen(c, rnd) or c.column_type}"
        if r < 0.86 and cols:
            return f"ADD COLUMN {qi(self.odd_name())} varchar(8) NULL"
        if r < 0.92 and cols:
            c = rnd.choice([c for c in cols if c.data_type == "varchar" and c.charset != "latin1"] or [None])
            if c is not None:
                return (f"MODIFY {qi(c.name)} varchar({int(c.maxlen)}) CHARACTER SET latin1"
                        f"{' NULL' if c.nullable else ' NOT NULL'}")
        return None

    def odd_name(self) -> str:
        return self.rnd.choice(["order", "key", "sp ace", "ü名", "pct%s", "dash-d", "b`t", "select"]) + str(self.n)

    def ddl(self, cat) -> list[str]:
        rnd = self.rnd
        r = rnd.random()
        if r < 0.07 or not cat:
            name = self.fresh("n")
            cols = ", ".join(self.coldef() for _ in range(rnd.randint(1, 4)))
            key = rnd.choice(["id int NOT NULL PRIMARY KEY, ", "id int NOT NULL, ", "id int NULL UNIQUE, "])
            opt = rnd.choice(["", " DEFAULT CHARSET=latin1", " COMMENT='new'"])
            return [f"CREATE TABLE {qi(name)} ({key}{cols}){opt}"]
        t = cat[rnd.choice(sorted(cat))]
        if r < 0.10:
            return [f"CREATE TABLE {qi(self.fresh('lk'))} LIKE {qi(t.name)}"]
        if r < 0.115:
            return [f"CREATE TABLE {qi(self.fresh('cs'))} (PRIMARY KEY (id)) SELECT {qi(t.cols[0].name)} AS id "
                    f"FROM {qi(t.name)} WHERE {qi(t.cols[0].name)} IS NOT NULL GROUP BY 1"]
        if r < 0.125:
            name = rnd.choice(sorted(cat))
            return [f"CREATE OR REPLACE TABLE {qi(name)} (id int PRIMARY KEY, v varchar(5) DEFAULT 'r')"]
        if r < 0.14:
            return [f"/* lead */ ALTER /*!50100 IGNORE */ TABLE {qi(self.db)}.{qi(t.name)} -- c\n ADD COLUMN {self.coldef()}"]
        if r < 0.13 and len(cat) > 2:
            return [f"DROP TABLE {qi(t.name)}"]
        if r < 0.16:
            return [f"TRUNCATE TABLE {qi(t.name)}"]
        if r < 0.17 and len(cat) > 1:
            a, b = rnd.sample(sorted(cat), 2)
            tmp = self.fresh("tmp")
            return [f"RENAME TABLE {qi(a)} TO {qi(tmp)}, {qi(b)} TO {qi(a)}, {qi(tmp)} TO {qi(b)}"]
        if r < 0.18:
            return [f"DROP TABLE IF EXISTS {qi(self.fresh('nx'))}, {qi(t.name)}"] if len(cat) > 2 else []
        if r < 0.20:
            if rnd.random() < 0.5:
                return [f"RENAME TABLE {qi(t.name)} TO {qi(self.fresh('rt'))}"]
            return [f"ALTER TABLE {qi(t.name)} RENAME TO {qi(self.fresh('rt'))}"]
        n = 1 if rnd.random() < 0.7 else rnd.randint(2, 3)
        clauses = [c for c in (self.alter_clause(t) for _ in range(n)) if c]
        if not clauses:
            return []
        return [f"ALTER TABLE {qi(t.name)} " + ", ".join(clauses)]

    def step(self):
        rnd = self.rnd
        cat = self.cat()
        r = rnd.random()
        if rnd.random() < 0.04:
            self.exec(rnd.choice(["SET time_zone = '+05:30'", "SET time_zone = '-08:00'", "SET time_zone = SYSTEM",
                                  "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')",
                                  "SET sql_mode = DEFAULT", "SET sql_mode = ''",
                                  "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')",
                                  "SET sql_mode = CONCAT(@@sql_mode, ',PAD_CHAR_TO_FULL_LENGTH')"]))
        if r < 0.30:
            stmts = self.ddl(cat)
            if stmts:
                self.exec(*stmts)
            return
        if not cat:
            return
        if r < 0.45:  # a transaction over several tables
            stmts = []
            for _ in range(rnd.randint(2, 6)):
                stmts += self.dml(cat[rnd.choice(sorted(cat))])
            self.exec(*stmts, txn="rollback" if rnd.random() < 0.2 else "commit")
            return
        t = cat[rnd.choice(sorted(cat))]
        self.exec(*self.dml(t))

    def bulk(self, rows=300):
        """A big transaction: many rows into one table."""
        cat = self.cat()
        if not cat:
            return
        t = cat[self.rnd.choice(sorted(cat))]
        cols = self.insert_cols(t)
        clist = ", ".join(qi(c.name) for c in cols)
        stmts = [f"INSERT IGNORE INTO {qi(t.name)} ({clist}) VALUES " +
                 ", ".join(self.row_values(t, cols) for _ in range(20)) for _ in range(rows // 20)]
        stmts.append(f"UPDATE {qi(t.name)} SET {qi(self.writable(t)[-1].name)} = "
                     f"{value(self.rnd, self.writable(t)[-1], self.conn)}")
        self.exec(*stmts, txn="commit")


def widen(c: Col, rnd) -> str | None:
    null = " NULL" if c.nullable else " NOT NULL"
    dflt = ""
    if c.default is not None and c.default != "NULL":
        dflt = f" DEFAULT {c.default}"
    ct = c.column_type
    if c.data_type == "int":
        return ct.replace("int", "bigint", 1) + null + dflt
    if c.data_type == "tinyint":
        return ct.replace("tinyint", "smallint", 1) + null + dflt
    if c.data_type == "decimal":
        return f"decimal({int(c.prec) + 2},{int(c.scale)})" + (" unsigned" if "unsigned" in ct else "") + null + dflt
    if c.data_type == "varchar":
        cs = rnd.choice(["", " CHARACTER SET utf8mb4", f" CHARACTER SET {c.charset}"])
        return f"varchar({int(c.maxlen) + rnd.choice([1, 10, 100])}){cs}" + null + dflt
    if c.data_type == "datetime":
        return "datetime(6)" + null + dflt
    if c.data_type == "enum":
        return ct[:-1] + ",'zz')" + null + dflt
    if c.data_type == "set":
        return ct[:-1] + ",'zz')" + null + dflt
    if c.data_type == "text":
        return "mediumtext" + null
    return None


# ---- the task ------------------------------------------------------------------------------------
def show_create(conn, schema, table) -> str:
    text = q(conn, f"SHOW CREATE TABLE {qt(schema, table)}")[0][1]
    text = re.sub(r"^CREATE TABLE `(?:[^`]|``)+`", "CREATE TABLE", text)
    return re.sub(r" AUTO_INCREMENT=\d+", "", text)


def rows(conn, schema, table):
    out = q(conn, f"SELECT * FROM {qt(schema, table)}")
    return sorted(out, key=repr)


class Fuzz:
    def __init__(self, stack, uniq, tmp_path, tables=BASE_TABLES, *, during_full=()):
        self.up, self.down = stack["up1"], stack["down"]
        self.db, self.tdb = f"fz{uniq}", f"tfz{uniq}"
        self.name, self.sid = f"fz{uniq}", f"fz-{uniq}"
        run(self.up, f"CREATE DATABASE {qi(self.db)} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            *[s.replace("CREATE TABLE ", f"CREATE TABLE {qi(self.db)}.", 1) for s in tables])
        self.text = one_source_task(self.name, self.sid, self.db, self.tdb, self.down)
        self.task = parse_task(self.text, "fuzz.yaml")
        self.task_file = Path(tmp_path) / f"{self.name}.yaml"
        self.task_file.write_text(self.text)
        self.tmp_path = tmp_path
        self.store = StateStore()
        register(self.store, {self.sid: self.up}, self.name, self.text)
        prepare(self.task, self.store)
        # statements while the full phase runs (after the low watermark, before the high one)
        run(self.up, *[s.replace(" t ", f" {qi(self.db)}.t ", 1) for s in during_full])
        finish(self.task, self.store)
        self.uconn = connect(self.up, autocommit=True)
        with self.uconn.cursor() as cur:
            cur.execute(f"USE {qi(self.db)}")
        self.events: list[str] = []

    def close(self):
        self.uconn.close()
        reset_task(self.store, self.name)
        self.store.close()
        drop_schemas(self.up, [self.db])
        drop_schemas(self.down, [self.tdb])

    def sync(self, windows=2, budget=300):
        r = Syncer(self.task, self.sid, self.store, budget_events=budget).run_until(float("inf"), max_windows=windows)
        self.events.append(f"sync({windows} windows, {budget} events) -> {r.end} paused={bool(r.paused)}")
        return r

    def killed(self, seconds: float):
        """A runner process SIGKILLed after ``seconds`` (a sensor killed mid-window)."""
        from .shard_helpers import spawn

        p = spawn(types.SimpleNamespace(task_file=self.task_file), self.sid, self.tmp_path, mode="forever",
                  budget_events=40, tag="fuzz")
        time.sleep(seconds)
        p.popen.kill()
        p.popen.wait()
        self.events.append(f"runner killed after {seconds:.2f}s")

    def crash(self, faults: str):
        """A runner process that dies (as on SIGKILL) at a named fault point (dm_core/faults.py)."""
        from .shard_helpers import spawn

        p = spawn(types.SimpleNamespace(task_file=self.task_file), self.sid, self.tmp_path, mode="settle",
                  budget_events=60, tag="fuzz", faults=faults, timeout=30)
        rc = p.wait(60)
        self.events.append(f"runner with {faults}: exit {rc}")
        return rc

    def settle(self):
        r = None
        for _ in range(30):
            r = self.sync(windows=20, budget=2000)
            if r.paused or r.caught_up:
                break
        return r

    def check(self, log=()):
        r = self.settle()
        st = self.store.source_state(self.task.name, self.sid)
        problems = []
        if r.paused or st["stage"] == "paused":
            problems.append(f"PAUSED: {r.paused or st['error']}")
        elif not r.caught_up:
            problems.append("did not catch up")
        dconn = connect(self.down)
        self.uconn.close()  # the workload may have changed its session's time_zone / sql_mode
        self.uconn = connect(self.up)
        try:
            up_tables = sorted(catalog(self.uconn, self.db))
            down_tables = sorted(catalog(dconn, self.tdb))
            if up_tables != down_tables:
                problems.append(f"tables differ: upstream {up_tables}, downstream {down_tables}")
            for t in sorted(set(up_tables) & set(down_tables)):
                a, b = show_create(self.uconn, self.db, t), show_create(dconn, self.tdb, t)
                if a != b:
                    problems.append(f"SHOW CREATE TABLE {t} differs:\n  up:   {a}\n  down: {b}")
                    continue
                ra, rb = rows(self.uconn, self.db, t), rows(dconn, self.tdb, t)
                if ra != rb:
                    only_up = [x for x in ra if x not in rb][:5]
                    only_down = [x for x in rb if x not in ra][:5]
                    problems.append(f"rows of {t} differ ({len(ra)} up, {len(rb)} down): only upstream "
                                    f"{only_up}, only downstream {only_down}")
        finally:
            dconn.close()
        if not problems and not r.paused:
            diffs = compare_task(self.task, self.store, wait=2)
            if not all(d.equal for d in diffs):
                problems.append("compare_task: " + render(diffs))
        if problems:
            text = "\n".join(problems)
            text += "\n--- statements:\n" + "\n".join(log)
            text += "\n--- syncs:\n" + "\n".join(self.events[-40:])
            pytest.fail(text)


@pytest.fixture
def fuzz(stack, uniq, tmp_path):
    made = []

    def make(tables=BASE_TABLES, during_full=()):
        f = Fuzz(stack, uniq + str(len(made) or ""), tmp_path, tables, during_full=during_full)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


FAULTS = ["sync.ddl.after_downstream", "sync.ddl.before_downstream", "sync.ddl.before_settle",
          "sync.after_batch_apply", "sync.apply.before_commit", "binlog.in_transaction", "sync.after_open"]

SEEDS = [11, 23, 37, 41, 59, 73]
if os.environ.get("FUZZ_SEEDS"):  # a longer hunt: FUZZ_SEEDS=100-140
    _a, _, _b = os.environ["FUZZ_SEEDS"].partition("-")
    SEEDS = list(range(int(_a), int(_b or _a) + 1))


# seeds that found the bugs below (the workload generator as of this file's first version)
FOUND = [302,   # bug A: a MODIFY of a key column's charset lost in a crash replay (fixed: ddl/dry_run.py)
         pytest.param(323, marks=pytest.mark.xfail(strict=True, reason="bug B (seed 323: INSERT IGNORE clipped a "
                                                                      "PERSISTENT generated column; paused on 1264, "
                                                                      "which cannot land as the upstream holds it: "
                                                                      "test_insert_ignore_clipping_..._saying_why)"))]


@pytest.mark.parametrize("seed", SEEDS + ([] if os.environ.get("FUZZ_SEEDS") else FOUND))
def test_random_schema_evolution_and_dml_with_restarts(fuzz, seed):
    f = fuzz()
    w = Workload(seed, f.uconn, f.db)
    rnd = random.Random(seed * 7919)
    steps = rnd.randint(60, 120)
    kills = 0
    for i in range(steps):
        w.step()
        roll = rnd.random()
        if roll < 0.12:
            r = f.sync(windows=rnd.randint(1, 3), budget=rnd.choice([20, 50, 300]))  # a stop, then a start
            w.log.append(f"-- synced ({r.end}{', PAUSED' if r.paused else ''})")
        elif roll < 0.16 and kills < 3:
            kills += 1
            fault = rnd.choice(FAULTS) + f"={rnd.randint(1, 3)}"
            rc = f.crash(fault)
            w.log.append(f"-- runner crashed at {fault} (exit {rc})")
    print(f"seed {seed}: {steps} steps, {sum(1 for x in w.log if x.startswith('-- skipped'))} skipped")
    if os.environ.get("FUZZ_DUMP"):
        Path(os.environ["FUZZ_DUMP"], f"fuzz-{seed}.sql").write_text("\n".join(w.log))
    try:
        f.check(w.log)
    except BaseException:
        print(f"seed {seed}")
        raise



HEAVY_SEEDS = [5, 17]
if os.environ.get("FUZZ_HEAVY_SEEDS"):
    _a, _, _b = os.environ["FUZZ_HEAVY_SEEDS"].partition("-")
    HEAVY_SEEDS = list(range(int(_a), int(_b or _a) + 1))


@pytest.mark.parametrize("seed", HEAVY_SEEDS)
def test_many_tables_big_transactions_and_ddl_right_after_restarts(fuzz, seed):
    """A data engineer's day: a dozen tables, transactions of hundreds of rows (larger than a
    window's event budget, so read in pieces), and a DDL as the first thing after each restart."""
    tables = [t.replace("CREATE TABLE t", f"CREATE TABLE t{i}_", 1) for i in range(4) for t in BASE_TABLES]
    f = fuzz(tables)
    w = Workload(seed, f.uconn, f.db)
    rnd = random.Random(seed * 104729)
    kills = 0
    for i in range(rnd.randint(40, 70)):
        if rnd.random() < 0.12:
            w.bulk(rnd.choice([100, 300, 600]))
        else:
            w.step()
        roll = rnd.random()
        if roll < 0.15:
            r = f.sync(windows=rnd.randint(1, 2), budget=rnd.choice([30, 100, 300]))
            w.log.append(f"-- synced ({r.end}{', PAUSED' if r.paused else ''})")
        elif roll < 0.2 and kills < 3:
            kills += 1
            fault = rnd.choice(FAULTS) + f"={rnd.randint(1, 4)}"
            rc = f.crash(fault)
            w.log.append(f"-- runner crashed at {fault} (exit {rc})")
        else:
            continue
        stmts = w.ddl(w.cat())  # the first thing after the restart
        if stmts:
            w.exec(*stmts)
    if os.environ.get("FUZZ_DUMP"):
        Path(os.environ["FUZZ_DUMP"], f"heavy-{seed}.sql").write_text("\n".join(w.log))
    f.check(w.log)


# ---- minimal reproductions -----------------------------------------------------------------------
def replay(f: Fuzz, *steps):
    """Statements (str) and sync points: "sync" (a new Syncer, a window), or "crash:POINT=N"."""
    for s in steps:
        if s == "sync":
            f.sync(windows=3)
        elif s.startswith("crash:"):
            f.crash(s[len("crash:"):])
        else:
            with f.uconn.cursor() as cur:
                cur.execute(s)
    f.check([s for s in steps])


REPLAY_BASE = "CREATE TABLE t (id int PRIMARY KEY, a int NULL, s varchar(20) CHARACTER SET utf8mb4 NOT NULL, KEY i (a))"

# What the fuzz found first (bug A, fixed by dm_core/ddl/dry_run.py): a DDL replayed in the
# safe-mode range (a crash after the exit point covered it, or the full phase's catch-up) was
# judged "already in effect" from information_schema's column names, types, nullability,
# defaults and index names, each change against the table before the statement: a change of
# charset, collation, comment, position or visibility looked done, and in DROP X, ADD X the
# ADD looked done (X exists), so only the DROP ran.
REPLAY_LOST = [
    "ALTER TABLE t MODIFY s varchar(20) CHARACTER SET latin1 NOT NULL",
    "ALTER TABLE t MODIFY s varchar(20) COLLATE utf8mb4_bin NOT NULL",
    "ALTER TABLE t MODIFY s varchar(20) NOT NULL COMMENT 'note'",
    "ALTER TABLE t MODIFY s varchar(20) NOT NULL FIRST",
    "ALTER TABLE t MODIFY a int NULL AFTER s",
    "ALTER TABLE t MODIFY a int NULL INVISIBLE",
    "ALTER TABLE t ADD COLUMN x int, MODIFY s varchar(20) CHARACTER SET latin1 NOT NULL",
    "ALTER TABLE t DROP INDEX i, ADD INDEX i (a, s)",
    "ALTER TABLE t DROP INDEX i, ADD UNIQUE INDEX i (a)",
    "ALTER TABLE t DROP COLUMN s, ADD COLUMN s varchar(20) NOT NULL DEFAULT 'z'",  # then rows pause the source
]
REPLAY_KEPT = [
    "ALTER TABLE t ALTER COLUMN s SET DEFAULT 'x'",
    "ALTER TABLE t CHANGE a a bigint NULL",
    "ALTER TABLE t MODIFY id bigint NOT NULL",
    "ALTER TABLE t CHANGE s s2 varchar(30) NOT NULL DEFAULT ''",
]


@pytest.mark.parametrize("ddl", REPLAY_LOST + REPLAY_KEPT)
def test_ddl_replayed_after_a_crash_before_it_ran_downstream(fuzz, ddl):
    """The runner dies after the safe-mode exit point covered the DDL and before it ran
    downstream (sync.ddl.before_downstream): the next start replays it in safe mode."""
    f = fuzz([REPLAY_BASE])
    replay(f, "INSERT INTO t VALUES (1, 1, 'a')", "sync", ddl, "crash:sync.ddl.before_downstream=1",
           "INSERT INTO t (id, a) VALUES (2, 2)" if "s2" in ddl else "INSERT INTO t (id, a, s) VALUES (2, 2, 'b')")


@pytest.mark.parametrize("ddl", REPLAY_LOST[:5] + REPLAY_LOST[7:] + REPLAY_KEPT)
def test_ddl_during_the_full_phase_replayed_in_the_catch_up(fuzz, ddl):
    """No crash at all: a DDL run upstream while the full phase runs (after the low watermark;
    the target was created before it) is replayed by the catch-up with the same judgement."""
    f = fuzz([REPLAY_BASE], during_full=[ddl])
    replay(f, "INSERT INTO t (id, a) VALUES (1, 1)" if "s2" in ddl else "INSERT INTO t (id, a, s) VALUES (1, 1, 'a')")


def test_insert_ignore_clipping_a_stored_generated_column_pauses_saying_why(fuzz):
    """Bug B: the upstream's INSERT IGNORE stored the clipped result of g's expression; the
    downstream computes g in strict mode and refuses the row (1264). The row cannot land as the
    upstream has it, so the source pauses on it, and the report says that g is generated and why
    it differs, rather than only "Out of range"."""
    f = fuzz(["CREATE TABLE t (id int PRIMARY KEY, c bigint unsigned, g bigint AS (c * 2 + 1) STORED)"])
    with f.uconn.cursor() as cur:
        cur.execute("INSERT INTO t (id, c) VALUES (1, 1)")
        cur.execute("INSERT IGNORE INTO t (id, c) VALUES (2, 4611686018427387904)")
    r = f.sync(windows=3)
    assert r.paused and "Out of range value for column 'g'" in r.paused, r.paused
    assert "`g` is a generated column downstream" in r.paused and "INSERT IGNORE" in r.paused, r.paused
    assert "MODIFY `g`" in r.paused and "WHERE (`id`) = (2)" in r.paused, r.paused
    down = connect(f.down)
    try:
        with down.cursor() as cur:   # the row before it landed: the source paused exactly at the culprit
            cur.execute(f"SELECT id, g FROM {qt(f.tdb, 't')}")
            assert cur.fetchall() == ((1, 3),)
    finally:
        down.close()


@pytest.mark.parametrize("ddl,point", [
    ("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, s)", "before"),   # was left without a primary key
    # the common crash: the DDL ran downstream, the checkpoint is still before it
    ("ALTER TABLE t DROP COLUMN a, ADD COLUMN a varchar(5) DEFAULT 'n'", "after"),   # the replay dropped the new `a`
    ("ALTER TABLE t DROP INDEX i, ADD INDEX i (s)", "after"),   # the replay dropped the new index `i`
    ("ALTER TABLE t CHANGE a b int, CHANGE s a varchar(20) NOT NULL", "after"),
    ("ALTER TABLE t CHANGE a b int, CHANGE s a varchar(20) NOT NULL", "before"),
    ("ALTER TABLE t ADD COLUMN v int AS (a + 1) VIRTUAL, ADD INDEX iv (v)", "after"),
    ("RENAME TABLE t TO t_old", "after"),
])
def test_redefining_ddl_replayed_after_a_crash(fuzz, ddl, point):
    """A crash just before (or just after) a DDL ran downstream, with the same name dropped and added again."""
    f = fuzz([REPLAY_BASE])
    replay(f, "INSERT INTO t VALUES (1, 1, 'a')", "sync", ddl, f"crash:sync.ddl.{point}_downstream=1", "sync")
