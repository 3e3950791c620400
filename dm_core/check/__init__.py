"""Precheck (DM's check-task): every check item of DM, plus shardflow's own, against the
real servers of a task, before anything is moved.

    report = run_prechecks(task, {"mysql-01": Endpoint(...)}, target_endpoint(task))
    print(report.render()); report.raise_for_errors()

Layout (one module per group of items, one function per item, sqlglot-style):

- ``probe.py``       the only server I/O: one connection and a few queries per server
- ``context.py``     what items see; the ``@item`` tag; sharding groups
- ``connections.py`` connection, conn_number
- ``server.py``      version, server_id, binlog_enable, binlog_format, binlog_row_image, binlog_row_metadata,
                      binlog_compression
- ``privileges.py``  dump_privilege, replication_privilege, target_privilege
- ``table_schema.py`` table_schema
- ``meta_position.py`` meta_position
- ``sharding.py``    schema_of_shard_tables, auto_increment_ID
- ``checker.py``     CHECKS (the ordered tuple of items) and ``run_prechecks``
- ``result.py``      CheckResult, CheckReport
"""

from dm_core.check.checker import CHECKS, IGNORABLE, run_prechecks
from dm_core.check.result import FAIL, PASS, WARN, CheckReport, CheckResult

__all__ = ["CHECKS", "IGNORABLE", "run_prechecks", "CheckReport", "CheckResult", "PASS", "WARN", "FAIL"]
