"""DM's rule engines, one module each, all of the same shape: a rule record with the task
file's YAML keys, a constructor ``(rules, case_sensitive)`` that compiles every pattern once,
and one query method.

=====================  ==================  ===========================================
module                 engine              query
=====================  ==================  ===========================================
``block_allow``        BlockAllowList      ``allow_table(schema, table)``
``router``             TableRouter         ``route(schema, table)``
``binlog_filter``      BinlogFilter        ``action(schema, table, event, sql)``
``column_mapping``     ColumnMapper        ``plan(schema, table, columns).map_row(row)``
``expression_filter``  ExpressionFilter    ``compile(schema, table, columns).skip_*(...)``
=====================  ==================  ===========================================

``patterns`` (wildcards, ``~regexp``, the shared schema/table selector), ``trie`` (what a DM
wildcard means, byte for byte, and the order DM's selector lists rules in), ``re2`` (Go's
regular expressions: what DM refuses, read by Python), ``dm_core.ddl.kind``
(DDL -> event type) and ``sql_*`` (MySQL expressions evaluated in Python) support them. Pure Python:
sqlglot and the standard library only.
"""
