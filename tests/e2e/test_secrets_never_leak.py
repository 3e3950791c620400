"""Passwords as DM users have them, through real Airflow and Spark: a source file and a task file
whose passwords are the output of an older DM's `dmctl encrypt` migrate as a user would run them
(operate-source create, start-task, query-status, validate, a source whose password stops working
for a while). Then every place a password could land is searched for the distinctive passwords
and their ciphertexts: Airflow's logs and home, dmctl's output, the state store (all but the sealed
password column), Airflow's metadata database (XCom, Variables, rendered fields, ...) and the
Variables as the API returns them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg2
import pytest
import yaml

from dm_core.db import connect, qt
from dm_core.secrets import dm_cipher

from ..integration.helpers import drop_schemas, make_shards
from .test_migration_through_airflow import _api, dmctl

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _sql(ep, *stmts):
    conn = connect(ep)
    with conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)
    conn.close()


def _pg_rows_as_text(dsn: str, skip: set[tuple[str, str]] = frozenset()) -> dict[str, str]:
    """table -> every row of it as text, for every table of every schema but the system's
    (``skip``: (table, column) pairs left out)."""
    out = {}
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
                    "AND table_schema NOT IN ('pg_catalog', 'information_schema')")
        for schema, table in cur.fetchall():
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                        (schema, table))
            cols = [c for (c,) in cur.fetchall() if (table, c) not in skip]
            if not cols:
                continue
            cur.execute(f'SELECT {", ".join(f"{chr(34)}{c}{chr(34)}::text" for c in cols)} FROM "{schema}"."{table}"')
            out[f"{schema}.{table}"] = "\n".join(" ".join(str(v) for v in row) for row in cur.fetchall())
    conn.close()
    return out


def test_encrypted_dm_passwords_migrate_and_no_password_is_ever_written_anywhere(stack, airflow, uniq, tmp_path):
    up, down = stack["up1"], stack["down"]
    src_pw, tgt_pw = f"SrcPw{uniq}Zq7", f"TgtPw{uniq}Wv4"
    src_user, tgt_user = f"lk_s{uniq}", f"lk_t{uniq}"
    # what an older DM's `dmctl encrypt` wrote (its built-in key)
    src_ct, tgt_ct = dm_cipher.encrypt(src_pw, dm_cipher.LEGACY_KEY), dm_cipher.encrypt(tgt_pw, dm_cipher.LEGACY_KEY)
    secrets = {"source password": src_pw, "target password": tgt_pw,
               "source ciphertext": src_ct, "target ciphertext": tgt_ct}
    schema, tdb, name, sid = f"lk{uniq}", f"lkt{uniq}", f"leak{uniq}", f"lk-{uniq}"
    _sql(up, f"CREATE USER '{src_user}'@'%' IDENTIFIED BY '{src_pw}'", f"GRANT ALL ON *.* TO '{src_user}'@'%'")
    _sql(down, f"CREATE USER '{tgt_user}'@'%' IDENTIFIED BY '{tgt_pw}'", f"GRANT ALL ON *.* TO '{tgt_user}'@'%'")
    make_shards(up, [schema], ["t_1"], rows=300)
    source_file = tmp_path / "source.yaml"
    source_file.write_text(yaml.safe_dump({"source-id": sid, "enable-gtid": False, "from": {
        "host": up.host, "port": up.port, "user": src_user, "password": src_ct}}))
    task_file = tmp_path / f"{name}.yaml"
    task_file.write_text(yaml.safe_dump({
        "name": name, "task-mode": "all",
        "target-database": {"host": down.host, "port": down.port, "user": tgt_user, "password": tgt_ct},
        "mysql-instances": [{"source-id": sid, "block-allow-list": "ba", "route-rules": ["r"]}],
        "routes": {"r": {"schema-pattern": schema, "target-schema": tdb}},
        "block-allow-list": {"ba": {"do-dbs": [schema]}}}, sort_keys=False))
    outputs = []

    def run(*args, check=True, timeout=900):
        r = dmctl(stack, *args, check=check, timeout=timeout)
        outputs.append(r.stdout + r.stderr)
        return r

    try:
        assert f"source {sid}: created" in run("operate-source", "create", str(source_file)).stdout
        run("operate-source", "show")
        run("check-task", str(task_file), check=False)
        run("start-task", str(task_file), "--remove-meta")
        _sql(up, f"INSERT INTO {qt(schema, 't_1')} (name, amount) VALUES ('live', 1)")
        r = run("query-status", name, "--wait-synced", "900", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert run("validate", name, check=False).returncode == 0

        # the source's password stops working: the sensor meets connection errors (logged, retried)
        _sql(up, f"ALTER USER '{src_user}'@'%' IDENTIFIED BY 'changed-{uniq}'")
        _sql(up, f"INSERT INTO {qt(schema, 't_1')} (name, amount) VALUES ('while-denied', 2)")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "Access denied" not in _task_logs(stack, name):
            time.sleep(5)
        assert "Access denied" in _task_logs(stack, name), "the sensor never met the refused login"
        _sql(up, f"ALTER USER '{src_user}'@'%' IDENTIFIED BY '{src_pw}'")
        r = run("query-status", name, "--wait-synced", "600", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert run("validate", name, check=False).returncode == 0
        run("query-status", name)
    finally:
        run("stop-task", name, check=False)
        (ROOT / "config" / "tasks" / f"{name}.yaml").unlink(missing_ok=True)

    try:
        _assert_nowhere(stack, name, secrets, outputs)
    finally:
        drop_schemas(up, [schema])
        drop_schemas(down, [tdb])
        _sql(up, f"DROP USER IF EXISTS '{src_user}'@'%'")
        _sql(down, f"DROP USER IF EXISTS '{tgt_user}'@'%'")


def _assert_nowhere(stack, name: str, secrets: dict, outputs: list[str]) -> None:
    home = Path(stack["env"]["AIRFLOW_HOME"])
    places = {f"dmctl output {i}": out for i, out in enumerate(outputs)}
    for f in home.rglob("*"):
        if f.is_file() and f.suffix not in (".db",):
            places[str(f)] = f.read_bytes().decode("utf-8", errors="replace")
    places.update({f"state store {t}": v for t, v in _pg_rows_as_text(stack["state_dsn"], {("source", "password")}).items()})
    airflow_dsn = stack["state_dsn"].rsplit("/", 1)[0] + "/airflow"
    places.update({f"airflow db {t}": v for t, v in _pg_rows_as_text(airflow_dsn).items()})
    api = _api(stack)
    variables = api._call("GET", "/api/v2/variables?limit=1000") or {}
    places["variables (API)"] = json.dumps(variables)
    assert any(name in v for k, v in places.items() if k.startswith("airflow db")), "the scan saw this task's runs"
    assert any(name in v for k, v in places.items() if k.startswith("state store")), "the scan saw this task's state"
    leaks = [f"{what} in {where}" for where, text in places.items() for what, s in secrets.items() if s in text]
    assert not leaks, "\n".join(leaks)


def _task_logs(stack, name: str) -> str:
    """The task logs of the task's incremental DAG."""
    home = Path(stack["env"]["AIRFLOW_HOME"]) / "logs"
    return "\n".join(f.read_text(errors="replace") for f in home.rglob("*") if f.is_file()
                     and f"dm_{name}_incremental" in str(f))
