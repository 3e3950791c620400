"""Full phase: every allowed upstream table copied into its target, chunk by chunk, each
chunk exactly once, then handed over to the incremental sync.

The phase runs in three places: the full DAG's ``prepare`` and ``finish`` steps (phase.py),
and between them the Spark job (spark_jobs/full_load.py), a thin driver that calls the
modules below for each table and chunk. A chunk takes these stages in order, each in its
own module:

    ==  ======================  ===========================================================
    1   plan                    what to copy, where it goes, in which chunks
        phase.py                ``prepare``: low watermark, target tables, XA transactions
                                open at the watermark (xa_wait.py), user-made targets
                                (user_targets.py); the targets' DDL: target_schema.py
        discover.py             which upstream tables, their routes and keys
        chunking.py             a table's key ranges (WHERE predicates), its chunk size
        plan_store.py           the plan persisted: chunk ids stay the same on a rerun
        loader.py               per table: skip recorded chunks, adopt committed ones,
                                land the rest a few at a time
        small_tables.py         one-chunk tables planned, read, written and marked in one
                                pass per batch of tables (stages 1-5 for many at once)
    2   read                    read.py: which reader a chunk takes, ``TEXT`` by default
        text_rows.py            (default) the upstream's SELECT makes each row a LOAD DATA line
        snapshot_read.py        the same lines in a consistent snapshot at a recorded
                                binlog position (a keyless table's one chunk)
        jdbc_read.py            Spark's JDBC source (its SQL: extract.py), where text cannot
                                carry a column, and for the staging and rows write modes
        land.py                 the driver's side of stages 2-4 for one chunk: its shape
                                now (extract.chunk_shape), the reader, the writer, retries
                                (a deadlock, a table changed while read, reconnect.py)
    3   encode                  lines are made upstream (text_rows.py); JDBC rows become
                                LOAD DATA text on the executor (load_data.encode)
    4   write                   write.py: on an executor, one transaction per chunk:
        load_data.py            ``LOAD DATA LOCAL INFILE`` streamed or spooled, write turns
                                (turns.py decides which tables take turns)
        chunk_writer.py         staging table + merge, the row path
    5   mark                    chunk_writer.py: the chunk's marker row, in the chunk's own
                                transaction; loader.py records it in the state store after
                                the commit (a rerun adopts a marker it did not record)
    6   hand over               phase.py ``finish``: high watermark, the sync's start;
                                renames during the load (renames.py) read again (reread.py)
    ==  ======================  ===========================================================

A chunk is in the target only together with its marker: a killed job, rerun, loads only the
chunks without one (chunk_writer.py says why that is exact). The whole job runs under the
task's load fence (fence.py), so a rerun never writes beside a stopped job still ending.
"""
