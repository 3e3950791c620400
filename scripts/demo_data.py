"""Seed and churn the demo upstream: 2 instances x schema_01..02 x table_01..02.

    python scripts/demo_data.py seed  [--rows N]   recreate the shards with N rows per table
    python scripts/demo_data.py churn [--seconds S] inserts/updates/deletes while replication runs
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dm_core.db import Endpoint, connect, qi, qt  # noqa: E402

PORTS = [int(os.environ.get("SHARDFLOW_UP1_PORT", 3307)), int(os.environ.get("SHARDFLOW_UP2_PORT", 3308))]
DOWN = int(os.environ.get("SHARDFLOW_DOWN_PORT", 4000))
USER = os.environ.get("SHARDFLOW_STACK_USER", "shardflow")
PASSWORD = os.environ.get("SHARDFLOW_STACK_PASSWORD", "shardflow-local")
SCHEMAS = ["schema_01", "schema_02"]
TABLES = ["table_01", "table_02"]
NAMES = ["alpha", "beta", "γάμμα", "дельта", "笑", None]


def ep(port: int) -> Endpoint:
    return Endpoint("127.0.0.1", port, USER, PASSWORD)


def seed(rows: int) -> None:
    rnd = random.Random(7)
    for port in PORTS:
        conn = connect(ep(port))
        with conn.cursor() as cur:
            for s in SCHEMAS:
                cur.execute(f"DROP DATABASE IF EXISTS {qi(s)}")
                cur.execute(f"CREATE DATABASE {qi(s)}")
                for t in TABLES:
                    cur.execute(f"""CREATE TABLE {qt(s, t)} (
                        id int NOT NULL AUTO_INCREMENT PRIMARY KEY,
                        name varchar(64) NULL,
                        amount decimal(12,2) NOT NULL DEFAULT 0,
                        created_at datetime NOT NULL,
                        note text NULL)""")
                    batch = [(rnd.choice(NAMES), round(rnd.uniform(0, 10000), 2),
                              f"2024-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)} 1{rnd.randint(0, 9)}:00:00",
                              None if i % 7 else "n" * rnd.randint(0, 300)) for i in range(rows)]
                    cur.executemany(f"INSERT INTO {qt(s, t)} (name, amount, created_at, note) VALUES (%s, %s, %s, %s)", batch)
        conn.close()
    down = connect(ep(DOWN))
    with down.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS `schema`")
    down.close()
    print(f"seeded {len(PORTS)} instances x {len(SCHEMAS)} schemas x {len(TABLES)} tables x {rows} rows")


def churn(seconds: float) -> None:
    rnd = random.Random()
    conns = [connect(ep(p)) for p in PORTS]
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        conn = rnd.choice(conns)
        s, t = rnd.choice(SCHEMAS), rnd.choice(TABLES)
        with conn.cursor() as cur:
            op = rnd.random()
            if op < 0.6:
                cur.executemany(f"INSERT INTO {qt(s, t)} (name, amount, created_at) VALUES (%s, %s, NOW())",
                                [(rnd.choice(NAMES), rnd.randint(0, 999)) for _ in range(rnd.randint(1, 20))])
            elif op < 0.9:
                cur.execute(f"UPDATE {qt(s, t)} SET amount = amount + 1, name = %s ORDER BY RAND() LIMIT 3",
                            (rnd.choice(NAMES),))
            else:
                cur.execute(f"DELETE FROM {qt(s, t)} ORDER BY RAND() LIMIT 2")
        n += 1
        time.sleep(0.02)
    for c in conns:
        c.close()
    print(f"churn: {n} upstream transactions in {seconds:.0f}s")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["seed", "churn"])
    p.add_argument("--rows", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=20)
    a = p.parse_args()
    seed(a.rows) if a.what == "seed" else churn(a.seconds)
