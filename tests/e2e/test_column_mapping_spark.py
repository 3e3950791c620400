"""Column mapping has one definition per kind (dm_core/rules/column_mapping.py): the Python
rewrite the syncer applies and the Spark SQL the full load applies must give the same
value for every row, and refuse the same rows. Checked on real Spark (local mode)."""

import os

import pytest

from dm_core.errors import ShardflowError
from dm_core.rules.column_mapping import ColumnMapper, ColumnMappingRule

pytestmark = pytest.mark.e2e

PID = ColumnMappingRule("s_*", "t_*", "id", "id", "partition id", ["1", "s_", "t_"])
PRE = ColumnMappingRule("s_*", "t_*", "id", "id", "add prefix", ["it's\\"])
SUF = ColumnMappingRule("s_*", "t_*", "id", "id", "add suffix", [":x"])

CASES = [  # rule, Spark column type, values (None = NULL)
    (PID, "bigint", [0, 7, (1 << 44) - 1, None]),
    (PID, "string", ["12", " 13", None]),
    (PRE, "string", ["a", "", None]),
    (SUF, "string", ["b", None]),
]
REFUSED = [  # rule, type, one value map_row refuses: the Spark job must fail too
    (PID, "bigint", 1 << 44),
    (PID, "bigint", -1),
    (PID, "string", "abc"),
    (PRE, "bigint", 5),
]


@pytest.fixture(scope="module")
def spark():
    from tests.integration.test_full_support import spark_env

    for k, v in spark_env().items():
        os.environ.setdefault(k, v)
    from pyspark.sql import SparkSession

    s = SparkSession.builder.master("local[1]").appName("mapping").config("spark.ui.enabled", "false").getOrCreate()
    yield s
    s.stop()


def _spark_map(spark, rule, typ, values):
    from pyspark.sql import functions as F

    from dm_core.full.jdbc_read import qcol

    t = ColumnMapper([rule]).plan("s_2", "t_3", ["id"]).transforms[0]
    df = spark.createDataFrame([(v,) for v in values], f"id {typ}")
    return [r[0] for r in df.select(F.expr(t.spark_sql(qcol("id"), typ == "string", "`s_2`.`t_3`.`id`"))).collect()]


@pytest.mark.parametrize("rule, typ, values", CASES, ids=lambda x: getattr(x, "expression", None) or str(x)[:20])
def test_spark_gives_the_python_rewrite(spark, rule, typ, values):
    plan = ColumnMapper([rule]).plan("s_2", "t_3", ["id"])
    assert _spark_map(spark, rule, typ, values) == [plan.map_row([v])[0] for v in values]


@pytest.mark.parametrize("rule, typ, value", REFUSED, ids=lambda x: getattr(x, "expression", None) or str(x)[:20])
def test_spark_refuses_what_python_refuses(spark, rule, typ, value):
    with pytest.raises(ShardflowError):
        ColumnMapper([rule]).plan("s_2", "t_3", ["id"]).map_row([value])
    with pytest.raises(Exception, match="column mapping"):
        _spark_map(spark, rule, typ, [value])
