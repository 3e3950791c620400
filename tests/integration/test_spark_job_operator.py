"""The full DAG's Spark task (SparkJobOperator) loads a task's rows through the machine's job
host when one runs (here: the test session's Spark application, which serves the product's
socket too), and with spark-submit when none does; the task log says which."""

import re
import sys

import pytest

from dm_core.validate.compare import compare_task, render
from tests import spark_host

from .test_full_support import execute, one_table_task, spark_env, submit_cmd

pytestmark = pytest.mark.integration


def _operator(name: str):
    from shardflow_airflow import runtime
    from shardflow_airflow.spark_job import SparkJobOperator

    return SparkJobOperator(task_id=f"spark_load_{name}", job="full_load", application_args=["--task", name],
                            conn_id="spark_default", spark_binary=runtime.spark_submit_binary(),
                            jars=runtime.jdbc_jar(), name=f"shardflow-full-{name}",
                            conf=runtime.submit_conf(sys.executable))


@pytest.fixture
def airflow_env(monkeypatch):
    # outside a task Airflow reads connections from AIRFLOW_CONN_* only (scripts/airflow_env.sh sets this one)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    for k, v in spark_env().items():
        if k.startswith(("SPARK_HOME", "PYSPARK_")):
            monkeypatch.setenv(k, v)
    return monkeypatch


def _load_through_operator(stack, uniq, tag: str, capsys) -> str:
    """What the task log shows (Airflow's operators log to stdout outside a task runner)."""
    with one_table_task(stack, f"op{tag}{uniq}", 80) as (task, store, tdb):
        _operator(task.name).execute({})
        shown = capsys.readouterr().out
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
        assert execute(stack["down"], f"SELECT COUNT(*) FROM {tdb}.t")[0][0] == 80
        return shown


def test_the_operator_loads_through_the_running_job_host(stack, uniq, airflow_env, capsys):
    host = spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())
    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(host.socket.parent))
    shown = _load_through_operator(stack, uniq, "h", capsys)
    assert "full_load runs on the job host: job host pid" in shown, shown[-3000:]
    assert "80 rows in 1 chunks" in shown, shown[-3000:]   # the job's own log, streamed into the task's


def test_with_no_job_host_the_operator_falls_back_to_spark_submit(stack, uniq, airflow_env, capsys, tmp_path):
    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(tmp_path / "none"))
    shown = _load_through_operator(stack, uniq, "s", capsys)
    assert "full_load runs with spark-submit: no job host runs" in shown, shown[-3000:]
    assert "80 rows in 1 chunks" in shown, shown[-3000:]   # spark-submit's output, in the task log


def test_a_job_host_running_older_code_is_not_used(airflow_env, monkeypatch, caplog):
    """shardflow upgraded (or edited) after the host started: the host would run the code it
    imported then, so the job keeps spark-submit and the log says how to get the host back."""
    import logging

    from dm_core import packaging
    from dm_core.jobhost import dispatch

    host = spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())
    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(host.socket.parent))
    here = packaging.code_fingerprint()
    monkeypatch.setattr(packaging, "code_fingerprint", lambda: "e0e0e0e0e0e0e0e0")
    log = logging.getLogger("test.jobhost.route")
    with caplog.at_level(logging.INFO, logger=log.name):
        ran = dispatch.run_on_host("full_load", ["--task", "never_sent"], master="local[2]", conf={}, log=log)
    assert ran is False
    assert re.search(r"full_load runs with spark-submit: the job host \(pid \d+\) runs other code than this worker's: "
                     rf"it started before shardflow changed here \(its code {here}, here e0e0e0e0e0e0e0e0\); restart it",
                     caplog.text), caplog.text


def test_a_downstream_away_longer_than_the_load_waits_is_run_again_by_airflow_and_nothing_else_is(
        stack, uniq, airflow_env, tmp_path):
    """The full DAG's load (through the job host) with its downstream down for longer than the
    load waits (SHARDFLOW_FULL_RECONNECT_S, 1 s here): the task fails with ServersAway, which the
    DAG's retry policy runs again; run again once the downstream is back, it loads every row once.
    A load that fails for any other reason fails the task for good, as before."""
    from airflow.sdk.definitions.retry_policy import RetryAction

    from shardflow_airflow.retry import ServersAway, when_servers_away

    from .mariadb_fixture import free_port, private_port, start_mariadb

    host = spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())
    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(host.socket.parent))
    airflow_env.setenv("SHARDFLOW_FULL_RECONNECT_S", "1")
    policy = when_servers_away()["retry_policy"]
    downd = start_mariadb(tmp_path, free_port(private_port(i) for i in range(0, 10)), 77, log_bin=False,
                          extra_args=["--local-infile=1"])
    try:
        with one_table_task({"up1": stack["up1"], "down": downd.endpoint()}, f"opa{uniq}", 80) as (task, store, tdb):
            downd.proc.kill()
            downd.proc.wait()
            with pytest.raises(ServersAway) as away:
                _operator(task.name).execute({})
            assert "a server it needs is away" in str(away.value) and "stop-task" in str(away.value), away.value
            assert policy.evaluate(away.value, 1, 1000).action == RetryAction.RETRY
            downd.start()
            _operator(task.name).execute({})     # Airflow's next try
            diffs = compare_task(task, store)
            assert diffs and all(d.equal for d in diffs), render(diffs)
            assert execute(downd.endpoint(), f"SELECT COUNT(*) FROM {tdb}.t")[0][0] == 80
        with pytest.raises(Exception) as other:   # the job refuses a task it does not know: exit 1
            _operator(f"unknown{uniq}").execute({})
        assert not isinstance(other.value, ServersAway), other.value
        assert policy.evaluate(other.value, 1, 1000).action == RetryAction.FAIL
    finally:
        downd.stop()


class _Choice:
    """The repair's view of what ``choose`` pushed (Airflow's TaskInstance.xcom_pull): only the
    XCom, since the repair runs here outside a DAG run."""

    def __init__(self, choice: dict):
        self.choice = choice

    def xcom_pull(self, task_ids: str, key: str):
        return self.choice


def test_a_validation_and_a_resync_that_met_a_downstream_away_are_run_again_by_airflow(
        stack, uniq, airflow_env, tmp_path):
    """The validation's job (through the job host, then spark-submit) and the re-sync's repair
    with their downstream down: each fails with ServersAway, which their DAGs' retry policy runs again, and
    run again once the downstream is back, the validation finds the tables equal and the repair
    writes the row it was asked to."""
    from airflow.sdk.definitions.retry_policy import RetryAction

    from shardflow_airflow.resync import ResyncRepairOperator
    from shardflow_airflow.retry import ServersAway, when_servers_away
    from shardflow_airflow.spark_job import SparkJobOperator
    from shardflow_airflow import runtime

    from .mariadb_fixture import free_port, private_port, start_mariadb

    host = spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())
    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(host.socket.parent))
    policy = when_servers_away()["retry_policy"]
    downd = start_mariadb(tmp_path, free_port(private_port(i) for i in range(0, 10)), 78, log_bin=False,
                          extra_args=["--local-infile=1"])
    try:
        with one_table_task({"up1": stack["up1"], "down": downd.endpoint()}, f"opv{uniq}", 80) as (task, store, tdb):
            _operator(task.name).execute({})
            validate = SparkJobOperator(task_id="spark_validate", job="validate",
                                        application_args=["--task", task.name, "--run-id", "v1", "--mode", "full"],
                                        conn_id="spark_default", spark_binary=runtime.spark_submit_binary(),
                                        jars=runtime.jdbc_jar(), conf=runtime.submit_conf(sys.executable))
            path = tmp_path / "task.yaml"
            path.write_text(store.get_task(task.name)[0])
            repair = ResyncRepairOperator(task_id="repair", task_file=str(path))
            context = {"ti": _Choice({"validation_run": "named", "compare": []}), "run_id": "r1"}
            _named_row_7(task, store, tdb)
            downd.proc.kill()
            downd.proc.wait()
            try:
                before = _connections(stack["up1"])

                with pytest.raises(ServersAway) as away:
                    validate.execute({})
                assert "validate on the job host" in str(away.value), away.value
                assert policy.evaluate(away.value, 1, 1000).action == RetryAction.RETRY
                # with no job host, spark-submit's exit code says it (read from the provider's hook)
                airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(tmp_path / "none"))
                with pytest.raises(ServersAway) as away:
                    validate.execute({})
                assert "validate (spark-submit)" in str(away.value), away.value
                airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(host.socket.parent))
                stored = store.validation(task.name, "v1")
                assert stored["status"] == "error" and stored["server_away"], stored

                with pytest.raises(ServersAway) as away:
                    repair.execute(context)
                assert f"the re-sync of {task.name}" in str(away.value) and "stop-task" in str(away.value), away.value
                assert policy.evaluate(away.value, 1, 1000).action == RetryAction.RETRY
                # the upstream's connections the failed runs opened are closed, not left to the garbage collector
                assert _connections(stack["up1"]) <= before, (before, _connections(stack["up1"]))
            finally:   # the task's clean-up needs its downstream
                downd.start()
            validate.execute({})   # Airflow's next try
            stored = store.validation(task.name, "v1")
            assert stored["status"] == "equal" and stored["finished_at"], stored
            execute(downd.endpoint(), f"DELETE FROM {tdb}.t WHERE id = 7")
            out = repair.execute(context)   # Airflow's next try
            assert out["ok"] and sum(t["written"] for t in out["tables"]) == 1, out
            assert execute(downd.endpoint(), f"SELECT v FROM {tdb}.t WHERE id = 7") == [("v7",)]
    finally:
        downd.stop()


def _connections(ep) -> set:
    """Ids of the shardflow user's connections on server ``ep`` (not the asking one)."""
    return {r[0] for r in execute(ep, "SHOW PROCESSLIST") if r[1] == ep.user and r[4] != "Query"}


def _named_row_7(task, store, tdb) -> None:
    """A finished validation run ``named`` that found row id 7 missing downstream: what the
    repair rewrites with what=last_validation."""
    from dm_core.validate.result import RowDiff, TableResult, ValidationResult

    found = ValidationResult(task.name, "named", finished_at="now", tables=[
        TableResult(f"{tdb}.t", differences=[RowDiff(kind="missing", key={"id": "7"})])])
    store.put_validation(task.name, "named", found.status, found.to_dict(), finished=True)


def test_a_spark_submit_killed_by_someone_else_fails_naming_the_signal_and_is_not_retried(
        stack, uniq, airflow_env, tmp_path):
    """spark-submit ended by a signal the operator did not send (the kernel's OOM killer, a kill by
    hand): the driver ends with it, its own last words nowhere, so the task log must say what
    happened, what is kept and how to run it again. It is not a server away: no retry."""
    import signal
    import subprocess
    import threading
    import time

    from airflow.sdk.definitions.retry_policy import RetryAction

    from shardflow_airflow.retry import when_servers_away

    airflow_env.setenv("SHARDFLOW_JOB_HOST_DIR", str(tmp_path / "none"))
    with one_table_task(stack, f"opk{uniq}", 80) as (task, store, tdb):
        op, failed = _operator(task.name), []

        def run():
            try:
                op.execute({})
            except BaseException as e:  # noqa: BLE001 - what the task would fail with
                failed.append(e)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        deadline = time.monotonic() + 60
        while getattr(op._hook, "_submit_sp", None) is None and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        sp = getattr(op._hook, "_submit_sp", None)
        assert sp is not None, f"spark-submit never started: {failed}"
        sp.send_signal(signal.SIGKILL)
        runner.join(120)
        assert not runner.is_alive() and failed, "the operator did not end with its spark-submit"
        said = str(failed[0])
        assert f"full_load (spark-submit, pid {sp.pid}) was killed by SIGKILL, not by shardflow" in said, said
        assert "OOM killer" in said and "clearing this task in Airflow" in said, said
        assert when_servers_away()["retry_policy"].evaluate(failed[0], 1, 1000).action == RetryAction.FAIL
        # its driver (if the JVM had started it) ends by itself and holds no connection into the clean-up
        while subprocess.run(["pgrep", "-f", f"full_load.py --task {task.name}"],
                             capture_output=True).returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
