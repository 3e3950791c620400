"""DM's `dmctl_command` case (pingcap/tiflow dm/tests/dmctl_command/run.sh), its user-visible part,
with DM's own task and source files (conf/, vendored unchanged) and DM's statements (data/, as
run.sh runs them: `dmctl_command`.`t1` on upstream 1, `t2` on upstream 2):

1. dmctl's usage: `--help` lists the commands; `start-task` without a file says its usage and
   exits non-zero; an unknown command is named (`unknown command "xxxx"`);
2. a source file whose password is DM-encrypted while no secret key is set: the cipher text is
   the password, and the upstream refuses it ("Access denied for user");
3. a source file with `backoff-max: 0.1s` is refused naming `backoff-max` (DM: "Please increase
   `backoff-max`");
4. a task whose `do-tables` entry has no `tbl-name` is refused (DM: "Table string cannot be
   empty"), one with `chunk-filesize: 6qwe4` names it (DM: "invalid `chunk-filesize` 6qwe4");
   neither starts anything;
5. the task file with `remove-meta: true` warns that it is deprecated and ignored: "please use
   `start-task ... --remove-meta` instead" (DM's words), and runs: full phase, then DM's increments
   (an update, a delete, a keyless table, new tables) synced, downstream equal to upstream.

Not ported: DM's master/worker processes (`list-member`, `-w worker`, DM_MASTER_ADDR), DM's
continuous validator counts (`validation status` here is the Spark validation's result), the
max_connections checks of TiDB Lightning.
"""

import pytest
import yaml

from .harness import dm_case, dmctl, register_sources, run_sql, start_task, table_rows

pytestmark = pytest.mark.integration

DB = "dmctl_command"


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1", "source2.yaml": "up2"},
                 {"up1": [DB], "up2": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def _variant(path, edit, out) -> str:
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    dst = path.parent / out
    dst.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(dst)


def _exits(*args) -> tuple[int, str, str]:
    """dmctl as the shell runs it: argparse's own exits (help, usage errors) are exit codes."""
    import contextlib
    import io

    from dm_core.cli.dmctl import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def test_dmctl_usage(stack):
    rc, out, err = _exits("--help")
    assert rc == 0 and "start-task" in out and "query-status" in out, out + err
    rc, out, err = _exits("start-task")
    assert rc != 0 and "start-task" in out + err and "usage" in (out + err).lower(), out + err
    rc, out, err = _exits("xxxx", "start-task")
    assert rc != 0 and "xxxx" in out + err, out + err


def test_dm_dmctl_command_case(case, stack, tmp_path, monkeypatch):
    files, store = case
    up1, up2, down = stack["up1"], stack["up2"], stack["down"]
    run_sql(up1, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t1 (id int, name varchar(20), PRIMARY KEY (id))",
            f"INSERT INTO {DB}.t1 (id, name) VALUES (1, 'arya'), (2, 'catelyn')")
    run_sql(up2, f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t2 (id int auto_increment, name varchar(20), PRIMARY KEY (id))",
            f"INSERT INTO {DB}.t2 (name) VALUES ('Arya'), ('Bran'), ('Sansa')")
    src1 = tmp_path / "source1.yaml"

    # 2. an encrypted password without the secret key
    monkeypatch.delenv("SHARDFLOW_SECRET_KEY_PATH", raising=False)
    enc = yaml.safe_load((files.conf / "source1-encrypted-pass.yaml").read_text())["from"]["password"]
    bad = _variant(src1, lambda d: d["from"].update(password=enc), "source1-encrypted-pass.yaml")
    rc, out, err = dmctl("operate-source", "create", bad)
    assert rc != 0 and "Access denied for user" in out + err, out + err

    # 3. backoff-max too small
    bad = _variant(src1, lambda d: d["checker"].update({"backoff-max": "0.1s"}), "wrong-source.yaml")
    rc, out, err = dmctl("operate-source", "create", bad)
    assert rc != 0 and "Please increase `backoff-max`" in out + err, out + err

    register_sources(files)

    # 4. a do-tables entry without tbl-name; a chunk-filesize that is no number
    before = store.task_info(files.name)
    def no_table(d):
        ba = d["block-allow-list"]["instance"]
        ba.pop("do-dbs")
        ba["do-tables"] = [{"db-name": DB}]
        d["ignore-checking-items"] = ["all"]
    bad = _variant(files.task_file, no_table, "wrong-dm-task.yaml")
    for cmd in ("check-task", "start-task"):
        rc, out, err = dmctl(cmd, bad)
        assert rc != 0 and "tbl-name" in out + err, (cmd, out + err)
    bad = _variant(files.task_file, lambda d: d["mydumpers"]["global"].update({"chunk-filesize": "6qwe4"}),
                   "wrong-dm-task.yaml")
    for cmd in ("check-task", "start-task"):
        rc, out, err = dmctl(cmd, bad)
        assert rc != 0 and "chunk-filesize" in out + err and "6qwe4" in out + err, (cmd, out + err)
    assert store.task_info(files.name) == before      # nothing started

    # 5. remove-meta in the task file: deprecated, said; the task runs
    rc, out, err = dmctl("check-task", str(files.task_file))
    assert rc == 0, out + err
    said = next((line for line in (out + err).splitlines() if "remove-meta" in line), "")   # DM: "`remove-meta` in
    assert "deprecated" in said and "please use `start-task ... --remove-meta` instead" in said, out + err  # task config is deprecated, ..."
    task, sync = start_task(files.task_file, store)
    for ep, t in ((up1, "t1"), (up2, "t2")):
        assert table_rows(down, DB, t, ["id", "name"]) == table_rows(ep, DB, t, ["id", "name"])
    run_sql(up1, f"USE {DB}", "INSERT INTO t1 (id, name) VALUES (3, 'Eddard Stark')", "INSERT INTO t1 (id, name) VALUES (4, 'xx')",
            "UPDATE t1 SET name='xx' WHERE id=1", "DELETE FROM t1 WHERE id=2", "CREATE TABLE t1_2 (id int)",
            "INSERT INTO t1_2 VALUES (1)", "CREATE TABLE t_trigger_flush1 (id int PRIMARY KEY)")
    run_sql(up2, f"USE {DB}", "DELETE FROM t2 WHERE name = 'Sansa'", "CREATE TABLE t_trigger_flush2 (id int PRIMARY KEY)")
    sync.settle()
    for ep, t, cols in ((up1, "t1", ["id", "name"]), (up2, "t2", ["id", "name"]), (up1, "t1_2", ["id"])):
        assert table_rows(down, DB, t, cols) == table_rows(ep, DB, t, cols), t
    assert table_rows(down, DB, "t1", ["id", "name"]) == [(1, "xx"), (3, "Eddard Stark"), (4, "xx")]
