"""Named fault points for tests (as DM's ``failpoint.Inject``): kill or stall a stage at a
known place, so resume and exactly-once can be tested deterministically.

Switched on only by the environment, e.g.::

    SHARDFLOW_FAULTS="full.after_chunk_write=3"              # os._exit(97) at the 3rd hit
    SHARDFLOW_FAULTS="full.before_chunk_merge=sleep:0.5"     # sleep 0.5 s at every hit
    SHARDFLOW_FAULTS="binlog.in_transaction=raise:3"         # raise FaultInjected (transient) at the 3rd hit only
    SHARDFLOW_FAULTS="sync.apply.before_commit=errno:1213"   # the server's error 1213 at every hit
    SHARDFLOW_FAULTS="shardddl.exec.before_downstream=fail:1"  # raise FaultFailed (terminal) at every hit from the 1st

``os._exit`` skips every finally block and atexit hook: the process ends as after SIGKILL,
without closing connections or rolling anything back itself. Counting is per process (the
full load's chunk bookkeeping runs in the Spark driver, so one counter sees every chunk).
Unset, :func:`hit` costs one dict lookup. ``errno:N`` is an error that will not go away (DM's
``retryableError`` failpoint): every hit raises what the MySQL driver raises for server error N,
so the caller's own retry and classification of that number run as against a real server.

Points: ``full.after_chunk_write`` (a chunk is committed downstream and recorded in the
state store), ``full.before_chunk_merge`` (a chunk is staged downstream, not yet merged),
``full.after_chunk_merge`` (merged and committed downstream, not yet recorded in the store),
``full.after_chunk_commit`` (an executor's LOAD DATA chunk and its marker are committed; with
``errno:2013`` the client loses the connection before hearing so, spark_jobs/full_load.py),
``full.small_table`` (an executor of the small tables' pass is about to copy its next table,
dm_core/full/small_tables.py), ``full.reread.after_empty`` (the full phase's ``finish`` emptied
the targets of tables a rename harmed and has not read them again yet: dm_core/full/reread.py),
``full.before_high_watermark`` (the full phase's ``finish`` is about to read a source's high
watermark and record it: dm_core/full/phase.py).

``validate.before_record``: the validation job (spark_jobs/validate.py) is about to write its
result so far, or its final result, to the state store.

``binlog.decode_row``: the binlog reader is about to decode a row event of a table the task
replicates; ``raise:N`` makes the N-th such event undecodable (dm_core/binlog/window.py).

``upstream.list_tables``: the precheck's probe (dm_core/check/probe.py) or the full phase's
discovery (dm_core/full/discover.py) is about to list an upstream's tables (DM's
FetchAllDoTablesFailed / FetchTargetDoTablesFailed).

DDL outside sharding groups (``dm_core.sync.syncer``; DM's FlushCheckpointStage stages):

* ``sync.ddl.before_settle`` — a DDL was read; the rows before it may not be durable downstream
  nor the checkpoint moved up to it (DM: "before flush old checkpoint");
* ``sync.ddl.before_downstream`` — everything before the DDL is durable and checkpointed, the
  DDL not sent (DM: "before track DDL", "before execute DDL");
* ``sync.ddl.after_downstream`` — the DDL ran downstream, the checkpoint is still before it
  (DM: "before save checkpoint", "before flush checkpoint").

Sync (``dm_core.sync``, ``dm_core.binlog``; in the order a window goes through them):

* ``sync.load_checkpoint`` — a window is about to read the source's checkpoint and stage
  (DM's LoadCheckpointFailed);
* ``upstream.master_status`` — a window is about to ask the upstream where its binlog ends
  (SHOW MASTER STATUS; DM's GetMasterStatusFailed);
* ``sync.after_open`` — a window fixed its start (the checkpoint) and loaded the safe-mode exit
  point; nothing read yet;
* ``binlog.in_transaction`` — a row event of a transaction was read, the transaction not yet
  complete (its XID not read); a hot loop, so checked only when the point is armed
  (:func:`armed`);
* ``sync.apply.before_commit`` — a worker sent its share of a batch downstream, not committed
  (the other workers may have committed theirs);
* ``sync.after_batch_apply`` — a batch committed downstream on every worker, the checkpoint not
  yet moved past it.

Online DDL (``dm_core.sync.online_ddl``): ``online_ddl.after_record`` — a gh-ost / pt-osc shadow
table's ALTER is recorded in the state store, the checkpoint still before it (DM's
ExitAfterSaveOnlineDDL).

Shard DDL (``dm_core.shardddl``, ``dm_core.sync.shard_sync``; the order a lock goes through):

* ``shardddl.sync.after_record`` — a sharded table's DDL is in the source's first-level group
  state, persisted; the checkpoint is still before the DDL;
* ``shardddl.ops.before_commit`` — any lock transition (put_info, mark_executing/executed,
  ack_done, resolve, unlock) is written in its transaction, not committed;
* ``shardddl.sync.after_put_info`` — the source's report is committed on the lock and the
  answer (wait/exec/skip) received, nothing done about it yet;
* ``shardddl.exec.before_downstream`` — the owner marked statement i ``executing``, not sent;
* ``shardddl.exec.after_downstream`` — statement i ran downstream, not marked executed;
* ``shardddl.sync.after_skip_ack`` — a non-owner acknowledged its skip op, checkpoint not moved;
* ``shardddl.sync.after_resolved`` — pessimistic: the round is resolved in memory, the
  checkpoint not yet moved back to the rewind position;
* ``shardddl.sync.after_rewind_checkpoint`` — the checkpoint is at the rewind position, the
  resolved group state not yet persisted.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from dm_core.errors import Terminal, Transient

EXIT_CODE = 97
_lock = threading.Lock()
_hits: dict[str, int] = {}


def _parse(text: str) -> dict[str, str]:
    """
    >>> _parse("a=3, b=sleep:0.5")
    {'a': '3', 'b': 'sleep:0.5'}
    """
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, action = part.partition("=")
        out[name.strip()] = action.strip()
    return out


class FaultInjected(Transient):
    """What a ``raise:N`` fault point raises: a transient error, as a lost connection is."""


class FaultFailed(Terminal):
    """What a ``fail:N`` fault point raises at every hit from the N-th: an error that pauses the
    source, as DM's ``return()`` failpoints that fail a statement each time (ExecDDLError)."""


def armed(name: str) -> bool:
    """Whether fault point ``name`` is configured (hot loops check once, then :func:`hit`)."""
    text = os.environ.get("SHARDFLOW_FAULTS")
    return bool(text) and bool(_parse(text).get(name))


def hit(name: str) -> None:
    """Pass fault point ``name``: exit hard at the configured hit count, sleep, raise
    :class:`FaultInjected` once at the configured hit, or :class:`FaultFailed` at every hit from it."""
    text = os.environ.get("SHARDFLOW_FAULTS")
    if not text:
        return
    action = _parse(text).get(name)
    if not action:
        return
    if action.startswith("sleep:"):
        with _lock:   # counted too: a test can tell a sleeping point was reached
            _hits[name] = _hits.get(name, 0) + 1
        time.sleep(float(action[6:]))
        return
    if action.startswith("errno:"):
        raise _server_error(int(action[6:]), name)
    if action.startswith("raise:"):
        with _lock:
            _hits[name] = _hits.get(name, 0) + 1
            if _hits[name] == int(action[6:]):
                raise FaultInjected(f"fault point {name}: injected error at hit {_hits[name]}")
        return
    if action.startswith("fail:"):
        with _lock:
            _hits[name] = _hits.get(name, 0) + 1
            if _hits[name] >= int(action[5:]):
                raise FaultFailed(f"fault point {name}: injected error at hit {_hits[name]}")
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] >= int(action):
            sys.stderr.write(f"shardflow fault point {name}: exiting hard at hit {_hits[name]}\n")
            sys.stderr.flush()
            os._exit(EXIT_CODE)


def _server_error(errno: int, name: str) -> Exception:
    """What mysqlclient raises for server error ``errno`` (callers on pymysql read the number
    from ``args[0]`` alike)."""
    import MySQLdb

    return MySQLdb.OperationalError(errno, f"fault point {name}: injected server error {errno}")
