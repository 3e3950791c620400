"""Every metric /metrics serves (name, kind, labels, meaning), and the metrics of DM's
dashboard and alert rules that it does not serve, with the reason. docs/operations.md
("Metrics") says the same for people; tests/unit/test_metrics_catalog.py keeps the two and
DM's lists in step."""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("task", "source_id", "instance")        # a source's series (instance: the source, see collector.py)
WORKER = SOURCE + ("worker",)                     # ... where DM also names the worker


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str          # gauge | counter (exposed as NAME_total) | histogram | untyped (a DM counter without _total)
    labels: tuple[str, ...]
    help: str

    def series_names(self) -> tuple[str, ...]:
        """The names its samples carry in the exposition."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}{s}" for s in ("_bucket", "_sum", "_count"))
        return (self.name,)


METRICS = (
    # ---- DM's names (dm/worker, dm/syncer/metrics, dm/loader, dm/master/metrics)
    Spec("dm_worker_task_state", "gauge", WORKER,
         "State of the source's subtask (DM's numbers): 0 invalid, 1 new, 2 running, 3 paused, 4 stopped, 5 finished."),
    Spec("dm_syncer_binlog_file", "gauge", ("node",) + SOURCE,
         "Binlog file number: node=master where the upstream's binlog ended when the source's last window began, "
         "node=syncer the checkpoint."),
    Spec("dm_syncer_binlog_pos", "gauge", ("node",) + SOURCE, "Binlog position within that file (node as for dm_syncer_binlog_file)."),
    Spec("dm_syncer_replication_lag_gauge", "gauge", WORKER,
         "Seconds the source was behind its upstream at the end of its last window (0 when caught up)."),
    Spec("dm_syncer_replication_lag", "histogram", WORKER,
         "Replication lag in seconds, observed whenever a batch committed downstream (now less its last event's "
         "time) and at the end of every window."),
    Spec("dm_syncer_remaining_time", "gauge", WORKER,
         "Estimated seconds to reach the upstream's binlog end: binlog bytes still to read over the last window's "
         "read rate."),
    Spec("dm_syncer_finished_jobs", "counter", ("type",) + WORKER,
         "Jobs applied downstream: row changes (type insert, update, delete) and DDL statements (type ddl)."),
    Spec("dm_syncer_finished_transaction", "counter", WORKER, "Upstream transactions applied downstream."),
    Spec("dm_syncer_txn_duration_time", "histogram", WORKER,
         "Seconds to apply one batch of row changes downstream: its transactions on every worker connection, committed."),
    Spec("dm_syncer_query_duration_time", "histogram", WORKER, "Seconds a DDL took to run downstream (shard DDL included)."),
    Spec("dm_syncer_exit_with_error_count", "untyped", SOURCE + ("resumable_err",),
         "Times the sync stopped on an error: resumable_err=false paused (a person must act), true a transient "
         "error the sensor retried."),
    Spec("dm_syncer_shard_lock_resolving", "gauge", SOURCE,
         "1 while the source has reported a pessimistic shard DDL and waits for the lock to resolve."),
    Spec("dm_syncer_unsynced_table_number", "gauge", ("table",) + SOURCE,
         "Tables of the source's sharding group for target `table` that have not reached the group's DDL yet."),
    Spec("dm_loader_progress", "gauge", SOURCE, "Full phase progress, 0 to 1: chunks loaded over chunks planned."),
    Spec("dm_loader_exit_with_error_count", "untyped", SOURCE + ("resumable_err",),
         "Times the full phase recorded an error for the source (resumable_err=false; a failed Spark job is a failed "
         "Airflow task, retried by Airflow)."),
    Spec("lightning_chunks", "gauge", SOURCE + ("state",),
         "Full phase chunks as DM's dashboard reads Lightning's: state=finished loaded, state=estimated planned."),
    Spec("lightning_tables", "gauge", SOURCE + ("state", "result"),
         "Full phase tables as DM's dashboard reads Lightning's: state=completed every chunk loaded, state=pending "
         "planned."),
    Spec("dm_master_ddl_state_number", "gauge", ("task", "type"),
         "Shard DDL locks of the task by state: Un-synced (waiting for shards, or in conflict), Synced (every shard "
         "reported; the DDL is being run)."),
    # ---- shardflow's own
    Spec("shardflow_task_status", "gauge", ("task", "status"), "1 for the task's status (running, paused, stopped), else 0."),
    Spec("shardflow_source_stage", "gauge", SOURCE + ("stage",),
         "1 for the source's stage (new, precheck, full, sync, paused, finished, stopped), else 0."),
    Spec("shardflow_source_updated_timestamp_seconds", "gauge", SOURCE,
         "When the source's state was last written (Unix time); a running syncer writes at least once per window."),
    Spec("shardflow_syncer_binlog_rows", "counter", WORKER,
         "Row changes of the upstream transactions the syncer applied (before filters and routing)."),
    Spec("shardflow_full_chunks", "gauge", SOURCE + ("state",), "Full phase chunks: state=loaded, state=planned."),
    Spec("shardflow_full_tables", "gauge", SOURCE + ("state",),
         "Full phase tables: state=loaded (every chunk), state=planned."),
    Spec("shardflow_full_rows_loaded", "counter", SOURCE, "Rows the full phase loaded."),
    Spec("shardflow_validation_status", "gauge", ("task", "status"),
         "1 for the status of the task's newest finished validation run (equal, different, pending, error), else 0."),
    Spec("shardflow_validation_differing_rows", "gauge", ("task",), "Rows the newest finished validation run found different."),
    Spec("shardflow_validation_pending_rows", "gauge", ("task",),
         "Rows the newest finished validation run could not confirm before row-error-delay."),
    Spec("shardflow_validation_finished_timestamp_seconds", "gauge", ("task",),
         "When the newest finished validation run ended (Unix time)."),
    Spec("shardflow_validation_running", "gauge", ("task",), "1 while a validation run of the task is going on."),
    Spec("shardflow_resync_holding", "gauge", ("task",),
         "1 while a re-sync run holds the task's sync (its lease not expired), else 0."),
    Spec("shardflow_resync_hold_seconds", "gauge", ("task",), "How long the task's current re-sync hold has lasted."),
    Spec("shardflow_shard_ddl_lock_waiting_seconds", "gauge", ("task", "lock_id", "mode", "status"),
         "Seconds since the active shard DDL lock left idle."),
)

BY_NAME = {m.name: m for m in METRICS}

# Metrics of DM's Standard dashboard and alert rules that shardflow does not serve, and why.
NOT_SERVED = {
    "dumpling_dump_estimate_total_rows": "dump and load are one Spark pass that estimates no row total; the load "
                                         "progress (lightning_chunks, dm_loader_progress) shows the same",
    "dumpling_dump_finished_rows": "served as shardflow_full_rows_loaded_total (no estimate to divide it by)",
    "lightning_row_read_bytes_sum": "the full phase counts rows and chunks, not bytes",
    "lightning_block_deliver_bytes_sum": "the full phase counts rows and chunks, not bytes",
    "go_goroutines": "a Go runtime metric (DM's dashboard reads only its k8s_cluster label; absent, the variable is empty)",
    "dm_mydumper_exit_with_error_count": "no separate dump unit: full-phase errors count in "
                                         "dm_loader_exit_with_error_count",
    "dm_relay_space": "no relay log (the relay unit is not built)",
    "dm_relay_exit_with_error_count": "no relay log (the relay unit is not built)",
    "dm_relay_data_corruption": "no relay log (the relay unit is not built)",
    "dm_relay_read_error_count": "no relay log: read errors of the binlog pause or retry the source "
                                 "(dm_syncer_exit_with_error_count)",
    "dm_relay_write_error_count": "no relay log (the relay unit is not built)",
    "dm_relay_binlog_file": "no relay log (the relay unit is not built)",
    "dm_master_worker_state": "no DM-workers: Airflow runs each source's sensor on any of its workers (Airflow's own "
                              "metrics watch them; shardflow_source_updated_timestamp_seconds shows a source no "
                              "syncer writes)",
    "dm_master_shard_ddl_error": "not recorded: a shard DDL error pauses the source (dm_syncer_exit_with_error_count) "
                                 "or leaves the lock in conflict (dm_master_ddl_state_number type Un-synced, "
                                 "shardflow_shard_ddl_lock_waiting_seconds status conflict)",
}
