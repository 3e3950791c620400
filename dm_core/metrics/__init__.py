"""Prometheus metrics, with DM's names where DM has the same thing, read from the state store.

DM keeps its metrics in each process (a DM-worker's syncer observes, its /metrics serves).
shardflow's syncers are Airflow sensors on any worker, each poke a short process step, so no
process may keep them: every figure lives in the state store and ``/metrics`` (served by the
Airflow plugin's FastAPI app) computes the series from it at each scrape.

    ==========  ===============================================================================
    observe.py  what a syncer measures (lag, apply and DDL times, jobs by kind, DM's buckets),
                added to the source's row by the writes it makes anyway (checkpoint, window end)
    catalog.py  every metric served (name, kind, labels, meaning) and DM's that are not, and why
    collector   ``read_state`` (the store, one pass) → ``families`` (pure) → ``exposition``
    ==========  ===============================================================================

docs/operations.md ("Metrics") lists them for people, with the scrape configuration, DM's
alert rules (config/prometheus/dm_worker.rules.yml, tested with promtool) and the dashboard.
"""
