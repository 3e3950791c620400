"""Building blocks of integration scenarios: shards upstream, a task file, the state store."""

from __future__ import annotations

import textwrap

from dm_core.db import connect, qi, qt


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


def shard_task_yaml(name: str, target_ep, sources: list[tuple[str, int]], prefix: str, target_db: str,
                    mode: str = "all", shard_mode: str = "pessimistic") -> str:
    """A DM task merging `{prefix}_N`.`t_M` of every source into `{target_db}`.`t` with partition ids."""
    inst = "\n".join(textwrap.dedent(f"""\
      - source-id: {sid}
        route-rules: [r-schema, r-table]
        column-mapping-rules: [cm-{i}]
        block-allow-list: ba""") for sid, i in sources)
    cms = "\n".join(textwrap.dedent(f"""\
      cm-{i}:
        schema-pattern: "{prefix}_*"
        table-pattern: "t_*"
        expression: "partition id"
        source-column: "id"
        target-column: "id"
        arguments: ["{i}", "{prefix}_", "t_"]""") for _, i in sources)
    return textwrap.dedent(f"""\
name: {name}
task-mode: {mode}
shard-mode: {shard_mode}
target-database:
  host: {target_ep.host}
  port: {target_ep.port}
  user: {target_ep.user}
  password: "{target_ep.password}"
mysql-instances:
""") + textwrap.indent(inst, "") + "\n" + textwrap.dedent(f"""\
routes:
  r-schema:
    schema-pattern: "{prefix}_*"
    target-schema: "{target_db}"
  r-table:
    schema-pattern: "{prefix}_*"
    table-pattern: "t_*"
    target-schema: "{target_db}"
    target-table: "t"
block-allow-list:
  ba:
    do-dbs: ["~^{prefix}_[0-9]+$"]
column-mappings:
""") + textwrap.indent(cms, "  ") + "\n"


def register(store, sources: dict, task_name: str, task_text: str) -> None:
    for sid, ep in sources.items():
        store.put_source(sid, {"source-id": sid, "host": ep.host, "port": ep.port, "user": ep.user}, ep.password)
    store.reset_task(task_name)
    store.put_task(task_name, task_text, "running")
