"""Where a Spark job runs (dm_core/jobhost/route.py): the job host only when it can run the job
as a spark-submit of its own would, and the task log's reason for every other case."""

import pytest

from dm_core.jobhost.route import choose

UP = {"pid": 7, "master": "local[2]", "running": 1, "waiting": 0, "jobs": 4, "code": "c0de"}
STD = {"spark.ui.enabled": "false", "spark.pyspark.python": "/p", "spark.driver.extraJavaOptions": "-X"}

CASES = [
    # environment, master, conf, host status, this worker's code -> on the host?, start (True) or restart one?,
    # words of the reason
    ({}, "local[2]", STD, UP, "c0de", True, False, "job host pid 7 (master local[2], 4 jobs run, 1 ahead of this one)"),
    ({}, "local[2]", STD, None, "c0de", False, False, "no job host runs"),
    ({"SHARDFLOW_JOB_HOST": "start"}, "local[2]", STD, None, "c0de", False, True, "no job host runs"),
    ({"SHARDFLOW_JOB_HOST": "start"}, "local[2]", STD, UP, "c0de", True, False, "job host pid 7"),
    ({"SHARDFLOW_JOB_HOST": "off"}, "local[2]", STD, UP, "c0de", False, False, "SHARDFLOW_JOB_HOST=off"),
    ({"SHARDFLOW_FAULTS": "full.after_chunk_write=3"}, "local[2]", STD, UP, "c0de", False, False,
     "SHARDFLOW_FAULTS is set: the executors read it"),
    ({}, "spark://m:7077", STD, UP, "c0de", False, False, "the job host runs master local[2], the job's connection says "
                                                  "spark://m:7077"),
    ({}, "local[2]", {**STD, "spark.executor.memory": "4g"}, UP, "c0de", False, False,
     "Spark conf of its own (spark.executor.memory)"),
    # shardflow upgraded or edited since the host started: it would run the old code
    ({}, "local[2]", STD, UP, "5eed", False, False, "the job host (pid 7) runs other code than this worker's: it "
                                                    "started before shardflow changed here (its code c0de, here 5eed)"),
    # with `start`, an idle host is restarted in the background; a busy one is left to its jobs
    ({"SHARDFLOW_JOB_HOST": "start"}, "local[2]", STD, {**UP, "running": 0}, "5eed", False, "restart",
     "runs other code than this worker's"),
    ({"SHARDFLOW_JOB_HOST": "start"}, "local[2]", STD, UP, "5eed", False, False, "restart it to use it again: "
                                                                                 "python -m dm_core.jobhost restart"),
    ({}, "local[2]", STD, {k: v for k, v in UP.items() if k != "code"}, "5eed", False, False, "its code unknown"),
    ({}, "local[2]", STD, UP, None, True, False, "job host pid 7"),   # not asked: nothing to compare
]


@pytest.mark.parametrize("environ, master, conf, status, code, host, start, why", CASES)
def test_route(environ, master, conf, status, code, host, start, why):
    got = choose(master=master, conf=conf, environ=environ, status=status, code=code)
    assert (got.host, got.start_host, got.restart_host) == (host, start is True, start == "restart")
    assert why in got.why


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="SHARDFLOW_JOB_HOST='sometimes' is not one of use, start, off"):
        choose(master="local[2]", conf={}, environ={"SHARDFLOW_JOB_HOST": "sometimes"}, status=UP)
