"""DM's `tls` case (pingcap/tiflow dm/tests/tls/run.sh), its source-and-target part
(test_source_and_target_with_empty_tlsconfig) with DM's files (conf/, vendored unchanged): a source
and a task whose `security` blocks are present but empty (`ssl-ca: ""`, `cert-allowed-cn: []`,
the `-bytes` and `-base64` keys), the task's target with `max-allowed-packet: null` and
`session: {}`, the deprecated `black-white-list`: they mean no TLS, and the task runs: DM's
`tls`.`t` (TINYINT, INT UNIQUE; 20 rows) through the full phase, then DM's row through the binlog,
downstream equal to upstream.

Not ported: DM's master/worker TLS (cert-allowed-cn between DM's own processes, HA with TLS):
shardflow's processes are Airflow's; its TLS to the upstreams and the downstream, with real
certificates, is tests/integration/test_tls.py.
"""

import pytest

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "tls"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source-no-tls.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]},
                 task_file="dm-task-no-tls.yaml") as got:
        yield got


def test_dm_tls_source_and_target_with_empty_tls_config(case, stack):
    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t (i TINYINT, j INT UNIQUE KEY)",
            *[f"INSERT INTO {DB}.t VALUES ({j}, {j}000{j}), ({j}, {j}001{j})" for j in range(1, 11)])
    register_sources(files)
    rc, out, err = dmctl("operate-source", "show")
    assert rc == 0 and "mysql-replica-01" in out, out + err
    task, sync = start_task(files.task_file, store, remove_meta=True)
    assert len(table_rows(down, DB, "t", ["i", "j"])) == 20
    run_sql(up, f"INSERT INTO {DB}.t VALUES (99, 9999999)")
    sync.settle()
    assert table_rows(down, DB, "t", ["i", "j"]) == table_rows(up, DB, "t", ["i", "j"])
    assert (99, 9999999) in table_rows(down, DB, "t", ["i", "j"])
