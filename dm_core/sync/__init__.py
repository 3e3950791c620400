"""Incremental sync: one source's binlog applied downstream, window by window.

A window (``syncer.Syncer.run_window``; ``run_until`` runs them back to back) takes these
stages in order, each in its own module:

    ==  ======================  ===========================================================
    1   session.py              the sensor's loop: lifecycle gate, fence, re-sync hold,
                                retries and pauses, what the UI reads
        operator_step.py        `dmctl binlog` skip / replace / inject at the event it names
                                (handle_error.py: the operations and how long they wait)
        safe_mode.py            at each start: safe mode up to the exit point, for
                                `safe-mode-duration`, or a refusal (DM's initialization phase)
    2   dm_core/binlog          read whole transactions in [checkpoint, upstream now)
    3   online_ddl.py           gh-ost / pt-osc shadow tables folded into the real table
    4   row_path.py             rows: block-allow list, event filter, expression filters,
                                route, column mapping, extract columns → ``job.RowJob``
    5   ddl.py, shard_sync.py   DDL: route the statement, coordinate shard DDL locks, run it
                                (dm_core/ddl: kinds, replay, the upstream session's clock and sql_mode)
        logged_statements.py    statements a STATEMENT/MIXED session logged instead of rows:
                                skipped or the source pauses (statements.py reads them)
    6   compactor.py            several changes of one row in a batch become one
    7   causality.py            jobs spread over workers without reordering a row
    8   merger.py, dml.py       one worker's jobs → statements (safe mode: REPLACE)
    9   apply_queue.py          batches applied in order on a background thread: the
                                safe-mode exit point first, then workers.py / applier.py /
                                literal.py send the statements, then the checkpoint
    10  isolate.py              a batch rejected for good: find the transaction and row
    ==  ======================  ===========================================================

The checkpoint only moves after the effects before it are durable downstream; the safe-mode
exit point is written before a batch is sent, so a replay after a crash stays idempotent.
"""
