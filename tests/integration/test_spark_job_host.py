"""The test session's Spark application (spark_jobs/job_host.py) answers as spark-submit would:
the same exit code and message for a job that refuses, the driver environment of each job
applied to that job only, and a refusal for a variable the executors would need."""

import pytest

from dm_core.validate.compare import compare_task, render
from spark_jobs.job_host import EXECUTOR_ENV
from tests import spark_host

from .test_full_support import one_table_task, run_load, spark_env, submit_cmd

pytestmark = pytest.mark.integration


def _host():
    return spark_host.shared_host(submit_cmd("", app="job_host.py"), spark_env())


def test_an_unregistered_task_fails_alike_on_the_host_and_with_spark_submit(uniq):
    name = f"nope{uniq}"
    hosted = run_load(name)
    submitted = run_load(name, env={"SHARDFLOW_FAULTS": "full.after_chunk_write=1000"})  # its own spark-submit
    assert hosted.args[:2] == ["job host", "full_load"] and hosted.args != submitted.args
    for r in (hosted, submitted):   # spark-submit prints the Python driver's output on stdout
        assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
        assert f"task '{name}' is not registered in the state store" in r.stdout + r.stderr, r.stdout[-3000:]


def test_a_variable_the_executors_read_is_refused_and_the_host_goes_on():
    for var in EXECUTOR_ENV:
        r = _host().run("full_load", ["--task", "x"], {var: "full.after_chunk_write=1"}, timeout=60)
        assert r.returncode == 2 and var in r.stderr and "spark-submit" in r.stderr, r.stderr
    r = _host().run("no_such_job", [], {}, timeout=60)
    assert r.returncode == 2 and "unknown job 'no_such_job'" in r.stderr


def test_a_jobs_driver_environment_is_its_own(stack, uniq):
    with one_table_task(stack, f"jh{uniq}", 50) as (task, store, _):
        refused = run_load(task.name, env={"SHARDFLOW_WRITE_MODE": "bogus"})   # argparse: not a write mode
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "SHARDFLOW_WRITE_MODE='bogus' is not one of load, staging, rows" in refused.stderr, refused.stderr
        loaded = run_load(task.name)   # the next job on the same host: the default write mode again
        assert loaded.returncode == 0, loaded.stderr[-3000:]
        assert "write mode load" in loaded.stderr
        diffs = compare_task(task, store)
        assert diffs and all(d.equal for d in diffs), render(diffs)
