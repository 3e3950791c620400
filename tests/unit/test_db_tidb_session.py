"""A task file written for TiDB sets tidb_* session variables (DM's do: tidb_txn_mode,
tidb_retry_limit ...); on a MySQL/MariaDB downstream the server refuses them as unknown, and
shardflow connects again without them. Any other refusal stays an error."""

import pymysql

from dm_core.db import Endpoint, _tidb_only

EP = Endpoint("h", 1, "u", session=(("foreign_key_checks", "0"), ("tidb_retry_limit", "10"),
                                    ("TiDB_Skip_UTF8_Check", "1")))


def test_unknown_tidb_variable_drops_every_tidb_variable():
    e = pymysql.err.OperationalError(1193, "Unknown system variable 'tidb_retry_limit'")
    assert _tidb_only(EP, e).session == (("foreign_key_checks", "0"),)


def test_other_errors_stay():
    assert _tidb_only(EP, pymysql.err.OperationalError(1193, "Unknown system variable 'foo'")) is None
    assert _tidb_only(EP, pymysql.err.OperationalError(1231, "Variable 'tidb_retry_limit' can't be set")) is None
    plain = Endpoint("h", 1, "u", session=(("foreign_key_checks", "0"),))
    assert _tidb_only(plain, pymysql.err.OperationalError(1193, "Unknown system variable 'tidb_x'")) is None
