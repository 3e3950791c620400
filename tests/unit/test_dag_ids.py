"""DAG and sensor ids of any task name DM accepts are keys Airflow takes (its KEY_REGEX:
letters, digits, `_ . -`), distinct for distinct names, and unchanged for plain names."""

import re

from dm_core.state.lifecycle import PHASES, dag_id, dag_key, sensor_task_id

AIRFLOW_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")   # ASCII: REST paths carry them unquoted


def test_plain_names_keep_their_ids():
    assert dag_id("shard-merge_01", "precheck") == "dm_shard-merge_01_precheck"
    assert sensor_task_id("mysql-replica-01") == "sync_mysql_replica_01"


def test_any_name_gives_airflow_keys_and_distinct_ones():
    names = ["t-Ë!s`t", "t-Ë?s`t", "a b", "a_b", "数据迁移", "x/y", "x\\y"]
    ids = [dag_id(n, p) for n in names for p in (*PHASES, "validate", "resync", "shard_ddl_unlock")]
    assert all(AIRFLOW_KEY.match(i) for i in ids), ids
    assert len(set(ids)) == len(ids)
    assert len({dag_key(n) for n in names}) == len(names)
    assert AIRFLOW_KEY.match(sensor_task_id("src Ë 1"))
