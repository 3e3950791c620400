"""The JDBC reader (stage 2, read; read.py says when a chunk takes it): the chunk's rows
through Spark's JDBC source, with routing, column mapping and extract columns applied as
Spark expressions. Its SQL (the SELECT, what a conversion would lose) is extract.py's.

Runs on the driver with the job's Spark session, which the caller passes in; pyspark is
imported only inside these functions, so the rest of dm_core.full never needs it.
"""

from __future__ import annotations


def jdbc_url(ep, *, write: bool = False, lenient: bool = False) -> str:
    # jdbc:mysql:// so Spark's MySQL dialect quotes identifiers with backticks
    url = (f"jdbc:mysql://{ep.host}:{ep.port}/?tinyInt1isBit=false&useUnicode=true&characterEncoding=utf8"
           "&sessionVariables=time_zone='+00:00'" + (",sql_mode=''" if lenient else ""))
    return url + ("&rewriteBatchedStatements=true" if write else "&useCursorFetch=true")


def props(ep, **extra) -> dict:
    from dm_core.tls import jdbc_properties

    return {"user": ep.user, "password": ep.password, "driver": "org.mariadb.jdbc.Driver",
            **jdbc_properties(ep.tls), **extra}


def qcol(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def transformed(df, st, task):
    """Routing + column mapping + extract columns as Spark expressions; each mapping kind
    gives its own Spark SQL (dm_core/rules/column_mapping.py), beside its Python rewrite."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    plan = task.rules_for(st.source_id).column_mapper.plan(st.schema, st.table, st.columns)
    cols = {c: F.col(qcol(c)) for c in st.columns}
    for t in (plan.transforms if plan else []):
        if not hasattr(t, "spark_sql"):
            raise ValueError(f"column mapping of {st.schema}.{st.table}: {type(t).__name__} has no Spark form")
        is_string = isinstance(df.schema[t.reads].dataType, StringType)
        cols[t.column] = F.expr(t.spark_sql(qcol(t.reads), is_string, f"`{st.schema}`.`{st.table}`.`{t.reads}`"))
    out = [cols[c].alias(c) for c in st.columns]
    out += [F.lit(v).alias(k) for k, v in st.extract.items()]
    return df.select(*out)


def frame(spark, task, now, where: str, up_ep, dump_where: str = ""):
    """The chunk ``where`` of table ``now`` (its shape at this moment) as a transformed
    DataFrame; refuses a chunk whose values a conversion to utf8mb4 would change."""
    from dm_core.db import connect
    from dm_core.full.extract import chunk_query, conversion_loss

    up = connect(up_ep)
    try:
        lost = conversion_loss(up, now, where, dump_where)
    finally:
        up.close()
    if lost:
        raise ValueError(lost)
    df = spark.session.read.jdbc(jdbc_url(up_ep), chunk_query(now, where, dump_where),
                                 properties=props(up_ep, fetchsize="10000"))
    return transformed(df, now, task)
