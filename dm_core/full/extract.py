"""The upstream SELECT of one chunk, written so Spark's JDBC reader cannot garble values.

Spark's JDBC source maps some MariaDB/MySQL types lossily (seen with Spark 4.2 and
Connector/J 2.7): TIME becomes a timestamp since 1970 (``100:00:00`` → 1970-01-05 04:00,
``-00:00:01`` → 1970-01-01 00:00:01), YEAR a DATE, BIT(8) a string of bit digits, and SET/ENUM
a blank-padded CHAR. Those columns are cast on the server to a type that survives the trip
(text for TIME/SET/ENUM, an unsigned integer for YEAR/BIT); the target column converts it back.

The chunk predicate goes inside the subquery, on the raw columns, so the server's range
access on the key still applies; Spark reads the derived table as one partition.
"""

from __future__ import annotations

from dm_core.db import qi, qt

_AS_TEXT = {"time", "set", "enum"}
_AS_UNSIGNED = {"year", "bit"}


def select_expr(column: str, data_type: str) -> str:
    """
    >>> select_expr("t", "time")
    'CAST(`t` AS CHAR) AS `t`'
    >>> select_expr("id", "int")
    '`id`'
    """
    if data_type in _AS_TEXT:
        return f"CAST({qi(column)} AS CHAR) AS {qi(column)}"
    if data_type in _AS_UNSIGNED:
        return f"CAST({qi(column)} AS UNSIGNED) AS {qi(column)}"
    return qi(column)


def chunk_query(st, where: str) -> str:
    """A derived table for Spark's ``dbtable``: the chunk's rows of ``st``, safely typed."""
    types = st.column_types or [""] * len(st.columns)
    cols = ", ".join(select_expr(c, t) for c, t in zip(st.columns, types))
    return f"(SELECT {cols} FROM {qt(st.schema, st.table)} WHERE {where}) AS sf_chunk"
