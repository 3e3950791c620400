"""Secrets at rest in the real state store: source passwords, TLS keys and task files are sealed;
rows of older versions (plain) still read and get sealed by rotate-state-key."""

import json

import pytest

from dm_core.cli.dmctl import main as dmctl
from dm_core.reset import reset_task
from dm_core.secrets import state_key
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA
from dm_core.tls import TLS

pytestmark = pytest.mark.integration


def _raw(store, sql, args):
    with store.tx() as cur:
        cur.execute(sql, args)
        return cur.fetchone()


def test_source_password_and_tls_key_rest_sealed(stack, uniq):
    sid, pw, key = f"sec-{uniq}", f"Pw-{uniq}-zeta", f"-----BEGIN PRIVATE KEY-----\nK{uniq}\n-----END PRIVATE KEY-----\n"
    cfg = {"source-id": sid, "host": "127.0.0.1", "port": 3306, "user": "u",
           "security": TLS("CA-PEM", "CERT-PEM", key).to_dict()}
    with StateStore() as store:
        try:
            store.put_source(sid, cfg, pw)
            config, password = _raw(store, f"SELECT config::text, password FROM {SCHEMA}.source WHERE source_id = %s", (sid,))
            assert password.startswith(state_key.PREFIX) and pw not in password
            assert uniq in config and f"K{uniq}" not in config, "the TLS private key is sealed in the config column"
            got_cfg, got_pw = store.get_source(sid)
            assert got_pw == pw and got_cfg["security"]["ssl-key-bytes"] == key
            assert got_cfg["security"]["ssl-ca-bytes"] == "CA-PEM"
        finally:
            with store.tx() as cur:
                cur.execute(f"DELETE FROM {SCHEMA}.source WHERE source_id = %s", (sid,))


def test_task_file_text_rests_sealed(stack, uniq):
    name, text = f"sect{uniq}", f"name: sect{uniq}\ntarget-database: {{password: Tpw-{uniq}}}\n"
    with StateStore() as store:
        try:
            store.put_task(name, text, "running")
            (raw,) = _raw(store, f"SELECT config_text FROM {SCHEMA}.task WHERE name = %s", (name,))
            assert raw.startswith(state_key.PREFIX) and f"Tpw-{uniq}" not in raw
            assert store.get_task(name) == (text, "running")
            store.register_task(name, text + "# changed\n")
            assert store.get_task(name)[0].endswith("# changed\n")
            assert store.task_info(name)["config_text"].endswith("# changed\n")  # what stop/pause/resume parse
            store.start_task(name, text)  # a new generation rests sealed too, and so does the started file
            raw, started = _raw(store, f"SELECT config_text, started_text FROM {SCHEMA}.task WHERE name = %s", (name,))
            assert raw.startswith(state_key.PREFIX) and store.task_info(name)["config_text"] == text
            assert started.startswith(state_key.PREFIX) and f"Tpw-{uniq}" not in started
            assert store.task_info(name)["started_text"] == text
        finally:
            reset_task(store, name)
            with store.tx() as cur:
                cur.execute(f"DELETE FROM {SCHEMA}.task WHERE name = %s", (name,))


def test_plain_rows_of_older_versions_read_and_get_sealed_by_rotate_state_key(stack, uniq, capsys):
    sid, name, pw = f"old-{uniq}", f"oldt{uniq}", f"Old-{uniq}"
    with StateStore() as store:
        try:
            with store.tx() as cur:     # rows as the previous version wrote them
                cur.execute(f"INSERT INTO {SCHEMA}.source (source_id, config, password) VALUES (%s, %s, %s)",
                            (sid, json.dumps({"source-id": sid, "host": "h", "port": 1, "user": "u"}), pw))
                cur.execute(f"INSERT INTO {SCHEMA}.task (name, config_text) VALUES (%s, %s)", (name, f"name: {name}\n"))
            assert store.get_source(sid)[1] == pw and store.get_task(name)[0] == f"name: {name}\n"
            assert dmctl(["rotate-state-key"]) == 0
            assert "sealed with the first key" in capsys.readouterr().out
            (raw,) = _raw(store, f"SELECT password FROM {SCHEMA}.source WHERE source_id = %s", (sid,))
            (text,) = _raw(store, f"SELECT config_text FROM {SCHEMA}.task WHERE name = %s", (name,))
            assert raw.startswith(state_key.PREFIX) and text.startswith(state_key.PREFIX)
            assert store.get_source(sid)[1] == pw and store.get_task(name)[0] == f"name: {name}\n"
        finally:
            with store.tx() as cur:
                cur.execute(f"DELETE FROM {SCHEMA}.source WHERE source_id = %s", (sid,))
                cur.execute(f"DELETE FROM {SCHEMA}.task WHERE name = %s", (name,))


@pytest.fixture
def private_store(stack, uniq, monkeypatch):
    """A state store in a database of its own, so re-keying it cannot touch the stack's rows."""
    import psycopg2

    db = f"sf_rot_{uniq}"
    admin = psycopg2.connect(stack["state_dsn"])
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{db}"')
    dsn = stack["state_dsn"].rsplit("/", 1)[0] + "/" + db
    monkeypatch.setenv("SHARDFLOW_STATE_DSN", dsn)
    yield dsn
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin.close()


def test_rotate_state_key_generate_reseals_under_a_new_first_key(private_store, uniq, tmp_path, monkeypatch, capsys):
    """After --generate, every stored secret opens with the new key alone."""
    keyfile = tmp_path / "state.key"
    keyfile.write_text(state_key.generate_key() + "\n")
    monkeypatch.setenv(state_key.KEY_FILE_ENV, str(keyfile))
    sid, pw, name = f"rot-{uniq}", f"Rot-{uniq}", f"rott{uniq}"
    with StateStore(private_store) as store:
        store.put_source(sid, {"source-id": sid, "host": "h", "port": 1, "user": "u"}, pw)
        store.put_task(name, f"name: {name}\n", "running")
        assert dmctl(["rotate-state-key", "--generate"]) == 0
        assert "new key added" in capsys.readouterr().out
        keys = [ln for ln in keyfile.read_text().splitlines() if ln and not ln.startswith("#")]
        assert len(keys) == 2
        keyfile.write_text(keys[0] + "\n")       # drop the older key
        assert store.get_source(sid)[1] == pw and store.get_task(name)[0] == f"name: {name}\n"
