"""shardflow's error registry.

Every error a user can meet has a stable code, a message and a workaround, registered once
here (as DM's terror list does). Whether an operation may be retried is a property of the
exception class (``Transient`` vs ``Terminal``), never of the message text.

    >>> e = ErrorCode.CONFIG_INVALID.error("task.yaml: name: missing")
    >>> str(e).splitlines()[0]
    '[code=10001:config] task.yaml: name: missing'
"""

from __future__ import annotations

import enum


class ShardflowError(Exception):
    """Base of every error shardflow raises on purpose."""

    code: "ErrorCode | None" = None
    # Set where known, for the pause report: the server's error number, the binlog position
    # of the transaction or statement that failed, and the statement (values redacted).
    errno: "int | None" = None
    position: object = None
    statement: "str | None" = None

    def __init__(self, message: str, *, code: "ErrorCode | None" = None, workaround: str | None = None):
        self.code = code or self.code
        self.message = message
        self.workaround = workaround or (self.code.workaround if self.code else "")
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"[code={self.code.number}:{self.code.klass}] " if self.code else ""
        tail = f"\nworkaround: {self.workaround}" if self.workaround else ""
        return f"{head}{self.message}{tail}"


class Terminal(ShardflowError):
    """Retrying cannot help: a person must change something first."""


class Transient(ShardflowError):
    """A retry (the next poke, the next attempt) may succeed without anyone acting."""


class Cancelled(Exception):
    """A job was told to stop (on the job host: its client went away, so its task was stopped):
    it starts nothing further. Not a ShardflowError: nothing failed, and nothing is reported
    against a table or a source."""


class ErrorCode(enum.Enum):
    # number, class, terminal?, workaround
    CONFIG_INVALID = (10001, "config", True, "Fix the keys named above, then run `dmctl check-task FILE`.")
    SOURCE_INVALID = (10002, "config", True, "Fix the source file, then run `dmctl operate-source create FILE`.")
    SOURCE_UNKNOWN = (10003, "config", True, "Register it first: `dmctl operate-source create SOURCE.yaml`.")
    TASK_UNKNOWN = (10004, "config", True, "Start it first: `dmctl start-task TASK.yaml`.")
    SECRET_KEY_INVALID = (10005, "config", True, "Point SHARDFLOW_SECRET_KEY_PATH at a readable file holding a hex AES-256 key (64 characters), as DM-master's secret-key-path, or unset it.")
    STATE_KEY_INVALID = (10006, "config", True, "Point SHARDFLOW_STATE_KEY_FILE at the key file the state store's secrets were sealed with (one Fernet key per line, newest first); see docs/operations.md, \"Secrets\".")
    PRECHECK_FAILED = (20001, "precheck", True, "Fix the items marked error (each names its fix), or list them in `ignore-checking-items` if you accept the risk.")
    UPSTREAM_UNREACHABLE = (30001, "database", False, "Check that the server is up and the source's host/port/user/password are right (`dmctl operate-source show`).")
    DOWNSTREAM_UNREACHABLE = (30002, "database", False, "Check that the target database is up and `target-database` in the task file is right.")
    STATE_STORE_UNREACHABLE = (30003, "database", False, "Check SHARDFLOW_STATE_DSN / the `shardflow_state` connection and that Postgres is up.")
    FULL_LOAD_FAILED = (40001, "load", False, "Rerun the full DAG: finished chunks are kept and only the rest is loaded.")
    FULL_LOAD_RENAMED = (40002, "load", True, "The tables named could not be read again alone (listed above: why). Start the full phase over once the renames are done: `dmctl stop-task TASK`, drop the downstream tables the task loaded (or its target databases), then `dmctl start-task --remove-meta TASK.yaml`; it reads every table again from a new low watermark. Keep renames of the task's tables (a table rotation, EXCHANGE PARTITION) from running during the load: pause the job that runs them, or leave those tables out of the block-allow list for the load. A rename after a table was read is harmless and is not reported.")
    BINLOG_POSITION_LOST = (50001, "sync", True, "The checkpoint's binlog file is gone from the upstream: run the full phase again, or set a newer `meta` position in the task file.")
    DDL_UNSUPPORTED = (50002, "sync", True, "Run `dmctl binlog skip TASK` to skip the statement, or `dmctl binlog replace TASK \"SQL\"` to run other SQL in its place.")
    DDL_EXEC_FAILED = (50003, "sync", True, "Fix the downstream, or run `dmctl binlog skip TASK` / `dmctl binlog replace TASK \"SQL\"`; then `dmctl resume-task TASK`.")
    DML_EXEC_FAILED = (50004, "sync", False, "The downstream is unreachable or busy (a transient error): the source retries with backoff from its last checkpoint in safe mode and pauses if it keeps failing.")
    SCHEMA_UNKNOWN = (50005, "sync", True, "The upstream must run with binlog_row_metadata=FULL so row events carry column names (`SET GLOBAL binlog_row_metadata='FULL'`), then resume.")
    SHARD_DDL_UNSUPPORTED = (50006, "shard-ddl", True, "Run `dmctl binlog skip TASK` to skip the statement, or `dmctl binlog replace TASK \"SQL\"` with statements on one table each.")
    SHARD_DDL_INCONSISTENT = (50007, "shard-ddl", True, "Every shard must run the same DDL statements in the same order. Run `dmctl shard-ddl-lock TASK` for the lock's members and statements. Then make the upstream consistent, or `dmctl binlog replace TASK \"SQL\"` on the source that differs, or `dmctl shard-ddl-lock unlock LOCK_ID` to force the lock.")
    SHARD_DDL_CONFLICT = (50008, "shard-ddl", True, "Run `dmctl shard-ddl-lock TASK` for the lock's members and statements. Make the shards' definitions compatible upstream (the lock resolves by itself once they are), or `dmctl shard-ddl-lock unlock LOCK_ID --action skip|exec` after fixing the downstream table by hand.")
    SHARD_DDL_LOCK = (50009, "shard-ddl", True, "Run `dmctl shard-ddl-lock TASK` for the lock's members and statements.")
    SHARD_DDL_EXEC_UNKNOWN = (50010, "shard-ddl", True, "Look at the downstream table: if the statement took effect run `dmctl shard-ddl-lock unlock LOCK_ID --action skip`, otherwise `--action exec`.")
    DML_REJECTED = (50011, "sync", True, "The downstream rejected the transaction for good (the error names why): fix the downstream table or data, then `dmctl resume-task TASK -s SOURCE`; or `dmctl binlog skip TASK -s SOURCE` to drop the transaction, or `dmctl binlog replace TASK -s SOURCE \"SQL\"` to run other SQL in its place.")
    SYNC_RETRIES_EXHAUSTED = (50012, "sync", True, "A transient error did not go away within the retries: the source resumes by itself after a backoff (1s up to the source file's `checker.backoff-max`, 5m) unless its `checker.check-enable` is false; fix what it names (server down, network, locks), then `dmctl resume-task TASK -s SOURCE` resumes it at once.")
    BINLOG_UNREADABLE = (50014, "sync", True, "shardflow cannot read this part of the binlog (the message names the event and why): turn the feature named off on the upstream, or `dmctl binlog skip TASK -s SOURCE` if losing the event is acceptable, or run the full phase again / start from a newer `meta` position.")
    ROW_IMAGE_PARTIAL = (50016, "sync", True, "The upstream wrote this change with binlog_row_image MINIMAL or NOBLOB (a session can set it): set binlog_row_image=FULL on the upstream, globally and in the sessions that changed it; then write the row downstream yourself and `dmctl binlog skip TASK -s SOURCE`, or run the full phase again.")
    FILTERED_AS_ERROR = (50015, "sync", True, "A binlog event filter of the task has action Error for this event: change the filter (or its action) in the task file and start the task again, or `dmctl binlog skip TASK -s SOURCE` to drop the event.")
    SAFE_MODE_REPROCESS = (50017, "sync", True, "Set `safe-mode-duration` greater than `0s` (or remove it: DM's default is twice `checkpoint-flush-interval`) in the task file's syncer config, then `dmctl stop-task TASK` and `dmctl start-task TASK.yaml`: the checkpoints are kept and the source replays in safe mode up to its exit point.")
    UPSTREAM_SWITCHED = (50018, "sync", True, "The source now reaches another server than the one its checkpoint was written on (a failover, a moved address) and, without `enable-gtid`, a binlog file and position mean nothing there. If both servers carry the same GTIDs, set `enable-gtid: true` in the source file, `dmctl operate-source update SOURCE.yaml`, then `dmctl resume-task TASK -s SOURCE`; otherwise point the source back at the old server, or run the full phase again.")
    HELD_ROWS_PURGED = (50019, "shard-ddl", True, "The upstream purged the binlog that holds the rows this source held back for a shard DDL lock before they could be replayed: they are not downstream. `dmctl binlog skip TASK -s SOURCE` gives the replay up (the source goes on from where it had read); then re-sync the merged tables named: trigger dm_TASK_resync with what=tables and tables=[schema.table]. Keep binlogs longer than a lock takes to resolve.")
    START_TIME_TOO_LATE = (50020, "sync", True, "Nothing in the upstream's binlog is stamped at or after the `--start-time` (in the upstream's time zone unless it has an offset): check the time; once the upstream has written past it, `dmctl resume-task TASK -s SOURCE` looks again, or `dmctl stop-task TASK` and start it with another time.")
    STATEMENT_ROW_CHANGE = (50021, "sync", True, "A session on the upstream ran with binlog_format STATEMENT or MIXED, so this change's rows are not in the binlog: set binlog_format=ROW there (globally, and in sessions that set it). Then make the downstream rows right yourself (the statement is above, with upstream names) and `dmctl binlog skip TASK -s SOURCE`, or re-sync the tables (trigger dm_TASK_resync); if the statement touched no table the task moves, just skip it.")
    XA_ROLLED_BACK = (50022, "sync", True, "The rows of this XA transaction were applied downstream at its XA PREPARE (as DM does) and the upstream has now rolled it back: re-sync the tables it changed (trigger dm_TASK_resync; `SHOW BINLOG EVENTS` at the PREPARE's position lists them), then `dmctl binlog skip TASK -s SOURCE`. If the task started after that PREPARE, nothing of it was applied: just skip.")
    XA_PREPARED_AT_START = (50023, "full", True, "Finish these XA transactions on the upstream (`XA RECOVER` lists them; `XA COMMIT` or `XA ROLLBACK` each, as its coordinator would: MariaDB keeps a prepared transaction after its client disconnects), then run the full phase again (`dmctl start-task TASK.yaml`, or clear the DAG run's prepare task). Their rows lie before the start in the binlog and in no snapshot, so a commit after the start would be lost.")
    SHARD_DDL_STATE_CHANGED = (50024, "shard-ddl", True, "Start the task with the file its shard DDL state was made under (config/tasks/TASK.yaml held it) and let what is named finish: run the same DDL on the tables a round waits for (`dmctl query-status TASK` lists them), or `dmctl shard-ddl-lock unlock LOCK_ID` for a lock; then stop the task and start it with the new file. Or start over with `dmctl start-task --remove-meta FILE`: a new full phase, nothing kept.")
    SCHEMA_TRACKER_MISMATCH = (50025, "sync", True, "Tell the tracker how the table stood at that position: `dmctl binlog-schema update TASK -s SOURCE DB TABLE FILE.sql` (FILE.sql holds its CREATE TABLE), or `--from-source` when the upstream's table has that shape now; then `dmctl resume-task TASK -s SOURCE`. An upstream that logs column names (binlog_row_metadata=FULL: MySQL 8.0.14+, MariaDB 10.5+) needs no tracker for new events.")
    UPSTREAM_BEHIND = (50026, "sync", False, "The server the source now reaches has not logged every transaction the checkpoint says is applied (a replica promoted while it still applied its relay log): the source retries with backoff and starts after them once it has logged them; `dmctl resume-task TASK -s SOURCE` tries at once. If it never will (the failover lost them), the downstream holds changes this server lacks: point the source back at the old server, or re-sync the task's tables (trigger dm_TASK_resync) and start the task from a `meta` position on this server.")
    SYNC_FAILED = (50013, "sync", True, "An unexpected error stopped the source (a shardflow bug or an unforeseen server answer): read the task log, then `dmctl resume-task TASK -s SOURCE`; report it if it comes back.")
    RESYNC_BUSY = (70001, "resync", False, "Another re-sync of the task is running: wait for it (dm_<task>_resync in Airflow), then trigger again.")
    RESYNC_HOLD_TIMEOUT = (70002, "resync", False, "A source did not hold its sync in time: read its sync task log in dm_<task>_incremental, then trigger the re-sync again.")
    RESYNC_INVALID = (70003, "resync", True, "Name target tables of the task as schema.table (the validation result lists them), or choose what=last_validation.")
    RESYNC_LOST_HOLD = (70004, "resync", False, "The re-sync lost its hold on the sync (it stalled past the lease): rows it rewrote are replayed in safe mode; trigger it again to finish.")
    BINLOG_PRIVILEGE = (30005, "database", True, "Grant the source's user REPLICATION CLIENT (BINLOG MONITOR on MariaDB >= 10.5) and REPLICATION SLAVE, or use task-mode full, which reads no binlog.")
    BINLOG_OFF = (30004, "database", True, "Start the upstream with --log-bin --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL.")
    AIRFLOW_API = (60001, "airflow", False, "Check that Airflow is up (`make airflow-up`) and SHARDFLOW_AIRFLOW_URL / credentials are right.")

    def __init__(self, number: int, klass: str, terminal: bool, workaround: str):
        self.number = number
        self.klass = klass
        self.terminal = terminal
        self.workaround = workaround

    def error(self, message: str, *, workaround: str | None = None) -> ShardflowError:
        cls = Terminal if self.terminal else Transient
        return cls(message, code=self, workaround=workaround)
