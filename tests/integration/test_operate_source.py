"""`dmctl operate-source create` with what DM users' source files hold: a password from an older
DM's `dmctl encrypt`, session variables, a flavor that must match the server, warnings."""

import json

import pytest
import yaml

from dm_core.cli.dmctl import main as dmctl
from dm_core.db import connect
from dm_core.secrets import dm_cipher
from dm_core.sources import source_endpoint
from dm_core.state import StateStore
from dm_core.state.schema import SCHEMA

pytestmark = pytest.mark.integration


def _file(tmp_path, sid, ep, **extra):
    p = tmp_path / f"{sid}.yaml"
    p.write_text(yaml.safe_dump({"source-id": sid, "from": {"host": ep.host, "port": ep.port, "user": ep.user,
                                                            "password": dm_cipher.encrypt(ep.password, dm_cipher.LEGACY_KEY),
                                                            **extra.pop("from", {})}, **extra}))
    return str(p)


@pytest.fixture
def sid(uniq):
    sid = f"os-{uniq}"
    yield sid
    with StateStore() as store, store.tx() as cur:
        cur.execute(f"DELETE FROM {SCHEMA}.source WHERE source_id = %s", (sid,))


def test_encrypted_password_and_session_variables_reach_the_source(stack, tmp_path, sid, capsys):
    f = _file(tmp_path, sid, stack["up1"], **{"from": {"session": {"sql_mode": "ANSI_QUOTES"}}},
              **{"server-id": 4321})
    assert dmctl(["operate-source", "create", f]) == 0
    out = capsys.readouterr()
    assert f"source {sid}: created" in out.out
    assert "warning: " in out.err and ": server-id: " in out.err
    with StateStore() as store:
        ep = source_endpoint(store, sid)
    assert ep.password == stack["up1"].password
    conn = connect(ep)
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        assert "ANSI_QUOTES" in cur.fetchone()[0]
    conn.close()
    assert dmctl(["operate-source", "show", sid]) == 0
    shown = capsys.readouterr().out
    assert json.loads(shown)["sources"][0]["source-id"] == sid and stack["up1"].password not in shown


def test_a_flavor_the_server_is_not_is_refused_naming_the_key(stack, tmp_path, sid, capsys):
    assert dmctl(["operate-source", "create", _file(tmp_path, sid, stack["up1"], flavor="mysql")]) == 1
    err = capsys.readouterr().err
    assert ": flavor: is mysql, but the server is " in err and "MariaDB" in err and "flavor: mariadb" in err
    with StateStore() as store:
        assert store.get_source(sid) is None
    assert dmctl(["operate-source", "create", _file(tmp_path, sid, stack["up1"], flavor="mariadb")]) == 0


@pytest.mark.parametrize("flavour", ["5.7", "8.0"])
def test_enable_gtid_on_a_mysql_server_without_gtids_is_refused_naming_the_key(stack, tmp_path, sid, capsys, flavour):
    """DM's 26007: `enable-gtid: true` needs MySQL's gtid_mode ON (the MySQL double, tests/mysql_master)."""
    from tests.mysql_master import BinlogBuilder, MysqlMaster

    with MysqlMaster(flavour, binlog=BinlogBuilder(flavour, gtid_mode=False), backing=stack["up1"]) as m:
        ep = m.endpoint()
        assert dmctl(["operate-source", "create", _file(tmp_path, sid, ep, **{"enable-gtid": True})]) == 1
        err = capsys.readouterr().err
        assert ": enable-gtid: is true, but the server (" in err and "gtid_mode = OFF instead of ON" in err, err
        assert "`enable-gtid: false`" in err
        with StateStore() as store:
            assert store.get_source(sid) is None
        assert dmctl(["operate-source", "create", _file(tmp_path, sid, ep, **{"enable-gtid": False})]) == 0
    with MysqlMaster(flavour, binlog=BinlogBuilder(flavour), backing=stack["up1"]) as m:
        assert dmctl(["operate-source", "create", _file(tmp_path, sid, m.endpoint(), **{"enable-gtid": True})]) == 0
    capsys.readouterr()
    # MariaDB logs GTIDs whatever gtid_mode would say: no such check
    assert dmctl(["operate-source", "create", _file(tmp_path, sid, stack["up1"], **{"enable-gtid": True})]) == 0
