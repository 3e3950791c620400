"""``meta_position``: an incremental task's start position exists on the source.

Only for task-mode incremental (task-mode all takes its position from the full phase).
A file/pos meta must name a binary log listed by SHOW BINARY LOGS, and the position must
lie within that file (4 <= pos <= its size). A meta with binlog-gtid alone (the sync starts
where the server resumes a replica at that GTID state) is asked of the server itself, as DM
does: a state whose transactions were purged, or that the server's binlog never had, fails
with the server's answer.
"""

from __future__ import annotations

from dm_core.check.context import REPLICATION, failed, item, passed
from dm_core.check.probe import ServerFacts

_FIX = ("set mysql-instances[].meta to an existing binlog position (see SHOW BINARY LOGS on the source), "
        "or run the task with task-mode: all")


@item("meta_position", scope="source", phase=REPLICATION)
def meta_position(ctx, src: ServerFacts):
    if ctx.task.task_mode != "incremental":
        return []
    if src.label in ctx.start_times:   # as DM: --start-time wins over meta, which is not checked
        return [passed(f"start-task --start-time {ctx.start_times[src.label]}: the sync starts at that time's "
                       f"binlog position, not at meta")]
    meta = getattr(ctx.instance(src.label), "meta", None)
    if meta is None:
        return [passed("no meta: replication starts at the task's checkpoint, else at the current position")]
    if getattr(meta, "binlog_gtid", None) and not meta.binlog_name:
        return _gtid(meta.binlog_gtid, src)
    name, pos = meta.binlog_name, int(meta.binlog_pos or 4)
    if not name:
        return [failed("meta has neither binlog-name nor binlog-gtid", _FIX)]
    if src.binary_logs is None:
        why = src.errors.get("binary_logs", "not read")
        return [failed(f"cannot list the binary logs to verify meta ({name}, {pos}): {why}",
                       "grant REPLICATION CLIENT (BINLOG MONITOR on MariaDB) and enable log_bin")]
    sizes = dict(src.binary_logs)
    if name not in sizes:
        have = f"{src.binary_logs[0][0]} .. {src.binary_logs[-1][0]}" if src.binary_logs else "none"
        return [failed(f"meta binlog file {name} is not on the server (binary logs: {have})", _FIX)]
    if not 4 <= pos <= sizes[name]:
        return [failed(f"meta position ({name}, {pos}) is outside the file (size {sizes[name]})", _FIX)]
    return [passed(f"meta position ({name}, {pos}) exists")]


def _gtid(gtid: str, src: ServerFacts):
    if src.gtid_start is None:
        why = src.errors.get("gtid_start", "not asked")
        return [failed(f"the server cannot resume from meta binlog-gtid {gtid}: {why}",
                       "set mysql-instances[].meta.binlog-gtid to a GTID state the server still has in its binary "
                       "logs (MariaDB's @@gtid_binlog_pos, MySQL's @@gtid_executed, or the state of an existing "
                       "checkpoint), or run the task with "
                       "task-mode: all")]
    return [passed(f"meta binlog-gtid {gtid}: the server resumes at {src.gtid_start}")]
