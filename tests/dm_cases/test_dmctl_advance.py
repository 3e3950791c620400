"""DM's `dmctl_advance` case (pingcap/tiflow dm/tests/dmctl_advance: run.sh and check_list/): dmctl's
wrong usages of the commands that act on errors and locks, each refused with its usage or a
message naming what is wrong, before any task is looked up (DM runs them against a master with
no task). One parameter per check_list function; the relay and sql_inject lists are commented
out in DM's run.sh too.

shardflow's answers: `binlog` and DM's older `handle-error` (the same operations: its task comes
first, then the operation) say their usage or the position's form (`FILE:POS`) or, for a
replacement, what the statements lack (shardflow needs the database named in each, so the
first statement of DM's pair is refused for that before the second's syntax is read; DM says
"invalid sql" of the second). `shard-ddl-lock unlock` needs one lock id; its `--force-remove`
is a flag. `binlog-schema` says its usage, or what its arguments lack, as DM's does.
"""

import contextlib
import io

import pytest

pytestmark = pytest.mark.integration

SQLS = ["alter", "table", "tb", "add", "column", "a", "int;", "alter", "table", "tb2", "b", "int;"]
BAD_POS = "mysql-bin:should-be-digital"

CASES = [  # (DM's check_list function, dmctl's words, what the answer must say)
    ("binlog_empty_arg", ["binlog"], ["usage: dmctl binlog", "skip,replace,inject,revert,list"]),
    ("binlog_invalid_binlogpos", ["binlog", "skip", "test-task", "--binlog-pos", BAD_POS],
     [f"binlog position '{BAD_POS}' is not FILE:POS"]),
    ("binlog_invalid_sqls_by_replace", ["binlog", "replace", "test-task", *SQLS],
     ["name the database of every table in: alter table tb add column a int"]),
    ("binlog_invalid_sqls_by_inject", ["binlog", "inject", "test-task", *SQLS],
     ["name the database of every table in: alter table tb add column a int"]),
    ("binlog_invalid_list_op", ["binlog", "list", "test-task", "--binlog-pos", BAD_POS],
     [f"binlog position '{BAD_POS}' is not FILE:POS"]),
    ("binlog_invalid_op", ["binlog", "wrong_operation", "test-task"], ["invalid choice: 'wrong_operation'"]),
    ("handle_error_wrong_arg", ["handle-error"],
     ["handle-error <task-name | task-file> [-s source ...] [-b binlog-pos] <skip/replace/revert> "
      "[replace-sql1;replace-sql2;]"]),
    ("handle_error_invalid_binlogpos", ["handle-error", "test-task", "--binlog-pos", BAD_POS, "skip"],
     [f"binlog position '{BAD_POS}' is not FILE:POS"]),
    ("handle_error_invalid_sqls", ["handle-error", "test-task", "replace", *SQLS],
     ["name the database of every table in: alter table tb add column a int"]),
    ("handle_error_invalid_op", ["handle-error", "test-task", "wrong_operation"], ["invalid operation 'wrong_operation'"]),
    ("unlock_ddl_lock_wrong_arg", ["shard-ddl-lock", "unlock"], ["dmctl shard-ddl-lock unlock LOCK_ID"]),
    ("unlock_ddl_lock_invalid_force_remove", ["shard-ddl-lock", "unlock", "lock_id", "--force-remove=invalid-force-remove"],
     ["--force-remove", "invalid-force-remove"]),
    ("source_table_schema_empty_arg", ["binlog-schema"], ["Available Commands"]),
    ("source_table_schema_lack_arguments_task", ["binlog-schema", "test"], ["Available Commands"]),
    ("source_table_schema_lack_arguments_list", ["binlog-schema", "list", "test"],
     ["dmctl binlog-schema list <task-name> <database> <table>"]),
    ("source_table_schema_lack_arguments_update", ["binlog-schema", "update", "test"],
     ["dmctl binlog-schema update <task-name> <database> <table> [schema-file] [flags]"]),
    ("source_table_schema_lack_arguments_source", ["binlog-schema", "update", "test", "test_db", "test_table",
                                                   "--from-source"], ["must specify at least one source"]),
    ("source_table_schema_both_froms", ["binlog-schema", "update", "test", "test_db", "test_table", "--from-source",
                                        "--from-target"], ["from-source and from-target can not be used together"]),
    ("source_table_schema_file_and_from", ["binlog-schema", "update", "test", "test_db", "test_table", "schema.sql",
                                           "--from-source"], ["can not set schema-file when use from-source or from-target"]),
    ("source_table_schema_lack_arguments_delete", ["binlog-schema", "delete", "test"],
     ["delete <task-name> <database> <table> [flags]"]),
]


def _dmctl(args: list[str]) -> tuple[int, str]:
    from dm_core.cli.dmctl import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = main(list(args))
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=out)
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue()


@pytest.mark.parametrize("args,says", [pytest.param(a, s, id=name) for name, a, s in CASES])
def test_dm_dmctl_advance_wrong_usage(stack, args, says):
    rc, out = _dmctl(args)
    assert rc != 0, out
    for words in says:
        assert words in out, out
    assert "Traceback" not in out and "unsupported syntax" not in out, out
