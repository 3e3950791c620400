"""Re-sync: rewrite downstream rows from the upstream union while incremental sync runs
(DAG ``dm_<task>_resync``), in this order:

    choose.py   what to rewrite: the keys the last validation named, or whole tables
                (compared first, on Spark, by the validation job: only differing rows move)
    hold.py     the handoff with the running syncers: hold at a checkpoint, safe mode up to
                the position after the reads, release (nothing lost, nothing applied twice)
    repair.py   per table and batch of keys: read the shards' rows, one downstream
                transaction deletes the keys' rows and writes the upstream ones
    run.py      the three above for one re-sync run, and its report
"""
