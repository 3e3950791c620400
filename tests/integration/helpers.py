"""Building blocks of integration scenarios: shards upstream, a task file, the state store."""

from __future__ import annotations

import yaml

from dm_core.db import connect, qi, qt
from dm_core.reset import reset_task


def make_shards(ep, schemas: list[str], tables: list[str], rows: int = 0, *, extra_cols: str = "") -> None:
    conn = connect(ep)
    with conn.cursor() as cur:
        for s in schemas:
            cur.execute(f"DROP DATABASE IF EXISTS {qi(s)}")
            cur.execute(f"CREATE DATABASE {qi(s)}")
            for t in tables:
                cur.execute(f"CREATE TABLE {qt(s, t)} (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                            f"name varchar(64) NULL, amount decimal(10,2) NOT NULL DEFAULT 0{extra_cols})")
                if rows:
                    cur.executemany(f"INSERT INTO {qt(s, t)} (name, amount) VALUES (%s, %s)",
                                    [(f"{s}.{t}.{i}" if i % 5 else None, i) for i in range(rows)])
    conn.close()


def drop_schemas(ep, schemas: list[str]) -> None:
    conn = connect(ep)
    with conn.cursor() as cur:
        for s in schemas:
            cur.execute(f"DROP DATABASE IF EXISTS {qi(s)}")
    conn.close()


def target_database(ep) -> dict:
    """The ``target-database`` block of a task file for ``ep``."""
    return {"host": ep.host, "port": int(ep.port), "user": ep.user, "password": ep.password}


def one_source_task(name: str, sid: str, db: str, tdb: str, down_ep, *, head: str = "", target=None) -> str:
    """A DM task (task-mode all) moving schema ``db`` of one source into ``tdb``; ``head``: more
    top-level keys; ``target``: the target-database block (default: ``down_ep``'s)."""
    return (f"name: {name}\ntask-mode: all\n{head}target-database: {target or target_database(down_ep)}\n"
            f"mysql-instances:\n  - source-id: {sid}\n    block-allow-list: ba\n    route-rules: [rs]\n"
            f"routes:\n  rs: {{schema-pattern: {db}, target-schema: {tdb}}}\n"
            f"block-allow-list:\n  ba: {{do-dbs: [{db}]}}\n")


def shard_task_yaml(name: str, target_ep, sources: list[tuple[str, int]], prefix: str, target_db: str,
                    mode: str = "all", shard_mode: str = "pessimistic",
                    do_dbs: dict[str, list[str]] | None = None) -> str:
    """A DM task merging `{prefix}_N`.`t_M` of every source into `{target_db}`.`t`, each source
    with its own partition-id column mapping (instance number ``i`` of ``(source-id, i)``).

    Sources share one block-allow-list of every `{prefix}_N` schema, unless ``do_dbs`` gives
    each source its own schema list (so two sources may share one upstream server).
    """
    task = {"name": name, "task-mode": mode}
    if shard_mode:
        task["shard-mode"] = shard_mode
    task["target-database"] = target_database(target_ep)
    task["mysql-instances"] = [
        {"source-id": sid, "route-rules": ["r-schema", "r-table"], "column-mapping-rules": [f"cm-{i}"],
         "block-allow-list": f"ba-{i}" if do_dbs else "ba"} for sid, i in sources]
    task["routes"] = {
        "r-schema": {"schema-pattern": f"{prefix}_*", "target-schema": target_db},
        "r-table": {"schema-pattern": f"{prefix}_*", "table-pattern": "t_*",
                    "target-schema": target_db, "target-table": "t"}}
    task["block-allow-list"] = ({f"ba-{i}": {"do-dbs": list(do_dbs[sid])} for sid, i in sources} if do_dbs
                                else {"ba": {"do-dbs": [f"~^{prefix}_[0-9]+$"]}})
    task["column-mappings"] = {
        f"cm-{i}": {"schema-pattern": f"{prefix}_*", "table-pattern": "t_*", "expression": "partition id",
                    "source-column": "id", "target-column": "id", "arguments": [str(i), f"{prefix}_", "t_"]}
        for _, i in sources}
    return yaml.safe_dump(task, sort_keys=False)


def register(store, sources: dict, task_name: str, task_text: str) -> None:
    for sid, ep in sources.items():
        store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user}, ep.password)
    reset_task(store, task_name)
    store.put_task(task_name, task_text, "running")


def steps(sess, want: str, n: int = 20):
    """Step a SyncSession until it reports ``want`` (its StepOutcome), at most ``n`` times."""
    import pytest

    for _ in range(n):
        out = sess.step()
        if out.state == want:
            return out
    pytest.fail(f"never {want!r}: last {out.state!r} {out.messages}")


def run_sql(ep, *stmts) -> None:
    """Statements on one (autocommit) connection of ``ep``."""
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
    finally:
        conn.close()


def purge_binlogs_to(ep, newest: str) -> None:
    """PURGE BINARY LOGS TO ``newest`` once no binlog dump reads an older file (the server
    keeps a file a dump thread still reads, silently)."""
    import time

    deadline = time.monotonic() + 30
    while True:
        run_sql(ep, f"PURGE BINARY LOGS TO '{newest}'")
        conn = connect(ep)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                files = [r[0] for r in cur.fetchall()]
                cur.execute("SHOW PROCESSLIST")
                procs = cur.fetchall()
        finally:
            conn.close()
        if files == [newest]:
            return
        assert time.monotonic() < deadline, procs
        time.sleep(0.2)
