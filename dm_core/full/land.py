"""Stages 2-4 of one chunk, on the driver: read its shape, choose its reader (read.py), hand
it to an executor's writer (write.py) and return the rows it landed with its marker.

:class:`Lander` is the ``land(plan_id, chunk) -> rows`` that loader.load_table calls for
each chunk of one table; the Spark job builds one per table with the job's Spark session
and :class:`LoadSettings`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from dm_core.db import connect, qt
from dm_core.errors import Cancelled
from dm_core.full import chunk_writer, read, reconnect, text_rows
from dm_core.full.phase import chunk_shape
from dm_core.full.write import RETRY_MARK, STATS_SCHEMA, ChunkJob

log = logging.getLogger("shardflow.full_load")


class Stages:
    """Executor seconds per stage of the load path, summed over every chunk of one job (the
    report's ``stages``: where the time went)."""

    def __init__(self):
        self.lock, self.total = threading.Lock(), {}

    def add(self, got: dict) -> None:
        with self.lock:
            for k, v in got.items():
                self.total[k] = self.total.get(k, 0) + v

    @contextlib.contextmanager
    def timed(self, name: str):
        """Driver seconds of a step, added under ``name``."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add({name: time.monotonic() - t0})


def _never() -> str | None:
    return None


@dataclass(frozen=True)
class LoadSettings:
    """One job's choices for every chunk: ``write_mode`` / ``read`` / ``write_batch`` as the
    job's arguments say, what the downstream allows (``load_data_ok``: LOAD DATA LOCAL;
    ``tidb``), its write turns (turns.Turns), where executor seconds add up (Stages), and
    ``cancelled()``, why the job must stop or None, asked before each chunk and each batch of
    small tables starts (a Spark job short enough slips between the host's cancels of every
    Spark job)."""

    write_mode: str
    read: str
    write_batch: int
    load_data_ok: bool
    tidb: bool
    turns: object
    stages: Stages
    cancelled: Callable[[], str | None] = _never

    def check_cancelled(self) -> None:
        why = self.cancelled()
        if why:
            raise Cancelled(f"not loaded: {why}")


def concise(e: Exception) -> Exception:
    """A Spark failure as its root cause's message, not pages of JVM stack (other errors as is)."""
    java = getattr(e, "java_exception", None)
    if java is None:
        return e
    while java.getCause() is not None:
        java = java.getCause()
    return RuntimeError(str(java.toString()).strip()[:2000])


# MariaDB's 1412: a transaction's snapshot predates an ALTER of the table it reads (ADD INDEX,
# MODIFY); the columns may be the same, the read must still start over
DEFINITION_CHANGED = "Table definition has changed"


class Retries:
    """When one chunk is loaded again after an error that is neither a lost connection nor final.

    Two causes, each with its own count, so one cannot use up the other's tries:

    - a deadlock or lock wait timeout downstream (``RETRY_MARK``: the chunk was rolled back):
      up to ``deadlocks`` times, waiting a little longer each time;
    - the upstream table changed while the chunk was read (its columns differ from the shape the
      read used: a DDL ran meanwhile, and the read failed with 1054) or its definition did
      (1412, ``DEFINITION_CHANGED``): once per change, up to ``changes`` times. A slow chunk
      can see every DDL of a busy load, so this bound is wide; each try needs a new change,
      which is what keeps it finite.
    """

    def __init__(self, deadlocks: int = 3, changes: int = 20, sleep=time.sleep):
        self.deadlocks, self.changes, self.sleep = deadlocks, changes, sleep
        self.seen_deadlocks = self.seen_changes = 0

    def after(self, error: BaseException, changed) -> str | None:
        """Why the chunk goes again after ``error``, or None: raise it. ``changed()``: whether the
        table's shape differs now from the one the read used (asked only when needed)."""
        if RETRY_MARK in str(error):
            if self.seen_deadlocks >= self.deadlocks:
                return None
            self.seen_deadlocks += 1
            self.sleep(0.2 * self.seen_deadlocks)
            return "deadlock or lock wait timeout downstream (rolled back)"
        if self.seen_changes < self.changes and (DEFINITION_CHANGED in str(error) or changed()):
            self.seen_changes += 1
            return "the upstream table changed while it was read"
        return None


class Lander:
    """``land(plan_id, chunk) -> rows`` of one table (loader.load_table)."""

    def __init__(self, spark, task, st, up_ep, target_ep, settings: LoadSettings):
        self.spark, self.task, self.st, self.up_ep, self.target_ep, self.settings = (
            spark, task, st, up_ep, target_ep, settings)
        inst = task.instance(st.source_id)
        self.verb = chunk_writer.verb(inst.loader.on_duplicate_logical)
        self.meta = task.meta_schema
        self.dump_where = inst.mydumper.where
        mode = settings.write_mode
        if mode == "load" and (not settings.load_data_ok or (settings.tidb and not st.key)):
            mode = "staging"
        self.mode = mode
        self.checked: dict = {}  # shape signature -> partition id check done (once per table definition)
        self.check_lock = threading.Lock()

    def __call__(self, plan_id, chunk) -> int:
        # DDL may run upstream while the load runs: each chunk reads the columns the
        # upstream and the target have at that moment, and is read again if the table
        # changed under it (dm_core/full/phase.py says why the result converges). A chunk
        # whose LOAD DATA deadlocked with another shard's chunk (rolled back) is read again, and
        # one cut off by a server that went away once it is back (dm_core/full/reconnect.py).
        st = self.st
        patience = reconnect.Patience()
        again = Retries()
        lost = False
        while True:
            self.settings.check_cancelled()
            try:
                shape = chunk_shape(self.task, st, self.up_ep, self.target_ep)
            except Exception as e:
                if reconnect.marked(e) and patience.again(st.name, chunk.chunk_id, e):
                    continue
                raise concise(e) from None
            if shape.table is None:
                log.warning("%s chunk %d: the upstream table is gone (dropped during the load); nothing to load",
                            st.name, chunk.chunk_id)
                return 0
            if lost:   # the server is back: did the chunk land before the connection went?
                done = self._marked_meanwhile(plan_id, chunk)
                if done is not None:
                    return done
            try:
                return self._land(plan_id, chunk, shape)
            except Exception as e:
                if reconnect.marked(e) and patience.again(st.name, chunk.chunk_id, e):
                    lost = True
                    continue
                why = again.after(e, lambda: chunk_shape(self.task, st, self.up_ep, self.target_ep).signature
                                  != shape.signature)
                if why is None:
                    raise concise(e) from None
                log.warning("%s chunk %d: %s; loading it again", st.name, chunk.chunk_id, why)

    def _marked_meanwhile(self, plan_id, chunk):
        """A connection lost while the chunk's COMMIT was under way: the server may have committed
        it (rows and marker) without the client hearing so. Its marker says; loading it again would
        collide with that marker. None: not landed, or the server cannot say (then the load that
        follows fails on the lost connection again and waits)."""
        try:
            conn = connect(self.target_ep, downstream=True)
        except Exception:   # noqa: BLE001 - still away: the next try asks again
            return None
        try:
            rows = chunk_writer.marked_chunks(conn, self.meta, plan_id).get(chunk.chunk_id)
        except Exception:   # noqa: BLE001
            return None
        finally:
            conn.close()
        if rows is None:
            return None
        log.info("%s chunk %d: it had landed (%d rows) when the connection was lost: its marker says so",
                 self.st.name, chunk.chunk_id, rows)
        return rows

    def _line_query(self, now, chunk, signature):
        """The chunk's text-path query, or None (a column the text path cannot carry)."""
        plan = self.task.rules_for(self.st.source_id).column_mapper.plan(now.schema, now.table, now.columns)
        transforms = plan.transforms if plan else []
        up = connect(self.up_ep)
        try:
            with self.check_lock:
                if signature not in self.checked:
                    self.checked[signature] = text_rows.partition_id_violation(up, now, transforms)
            if self.checked[signature]:
                raise ValueError(self.checked[signature])
            return text_rows.line_query(now, transforms, up.literal, chunk.where, self.dump_where)
        finally:
            up.close()

    def _report(self, chunk, t0, got, how=""):
        self.settings.stages.add(got)
        log.info("%s chunk %d: %d rows loaded in %.2fs (executor: read %.2fs, encode %.2fs, write %.2fs, "
                 "wait for a turn of the table %.2fs, load %.2fs, commit %.2fs)%s%s", self.st.name, chunk.chunk_id,
                 got["rows"], time.monotonic() - t0, got["read"], got["encode"], got["write"], got["wait"], got["load"],
                 got["finish"], ", spooled while another chunk loaded" if got.get("spooled") else "", how)
        return got["rows"]

    def _job(self, plan_id, chunk, shape, columns, **more) -> ChunkJob:
        now = shape.table
        return ChunkJob(self.target_ep, self.meta, self.st, tuple(columns), self.verb, plan_id, chunk.chunk_id,
                        self.task.name, drifted=shape.drifted, types=dict(zip(now.columns, now.column_types or [])),
                        same_bytes=shape.same_bytes, up_ep=self.up_ep, batch=self.settings.write_batch, **more)

    def _land(self, plan_id, chunk, shape) -> int:
        from dm_core.full import jdbc_read, write

        self.spark.sparkContext.setJobDescription(f"{self.st.name} chunk {chunk.chunk_id}")
        now = shape.table
        reader = read.reader_for(self.mode, self.settings.read, self.st, chunk.where, self.settings.load_data_ok)
        if self.mode == "staging":
            return self._staged(plan_id, chunk, shape, reader)
        query = self._line_query(now, chunk, shape.signature) if reader != read.JDBC else None
        turn = self.settings.turns.of(self.target_ep, self.st.target_schema, self.st.target_table) \
            if self.mode == "load" else None
        if query is not None:
            t0 = time.monotonic()
            job = self._job(plan_id, chunk, shape, text_rows.columns_of(now), turn=turn, query=query,
                            at_snapshot=reader == read.SNAPSHOT)
            (got,) = self.spark.sparkContext.parallelize([chunk.chunk_id], 1).mapPartitions(
                write.text_writer(job)).collect()
            return self._report(chunk, t0, got, "; text read as binary (already in the columns' character sets)"
                                if shape.same_bytes else "; text read as utf8mb4")
        df = jdbc_read.frame(self.spark, self.task, now, chunk.where, self.up_ep, self.dump_where)
        job = self._job(plan_id, chunk, shape, df.columns, turn=turn)
        if self.mode == "load":
            t0 = time.monotonic()
            (got,) = df.mapInArrow(write.arrow_writer(job), STATS_SCHEMA).collect()
            return self._report(chunk, t0, got.asDict())
        return sum(df.rdd.mapPartitions(write.rows_writer(job)).collect())

    def _staged(self, plan_id, chunk, shape, reader: str) -> int:
        """The staging path (chunk_writer.py): the chunk into its staging table -- a keyless
        table's lines read at a recorded binlog position (snapshot_read.py), so the sync's
        catch-up takes over from it exactly, else Spark's JDBC writer -- then merged into the
        target with its marker."""
        from dm_core import faults
        from dm_core.full import jdbc_read, write
        from dm_core.full.extract import lenient

        st, target_ep, meta = self.st, self.target_ep, self.meta
        staging = chunk_writer.staging_name(plan_id, chunk.chunk_id)
        df = jdbc_read.frame(self.spark, self.task, shape.table, chunk.where, self.up_ep, self.dump_where)
        query = self._line_query(shape.table, chunk, shape.signature) if reader == read.SNAPSHOT else None
        columns = text_rows.columns_of(shape.table) if query is not None else df.columns
        job = self._job(plan_id, chunk, shape, columns, query=query)
        down = connect(target_ep, downstream=True)
        try:
            t0 = time.monotonic()
            snap = None
            chunk_writer.create_staging(down, meta, staging, st.target_schema, st.target_table, list(columns))
            if query is not None:
                (got,) = self.spark.sparkContext.parallelize([chunk.chunk_id], 1).mapPartitions(
                    write.text_to_staging(job, staging)).collect()
                snap = got["snapshot"]
            else:
                df.write.jdbc(jdbc_read.jdbc_url(target_ep, write=True, lenient=shape.drifted), qt(meta, staging),
                              mode="append", properties=jdbc_read.props(target_ep,
                                                                        batchsize=str(self.settings.write_batch)))
            faults.hit("full.before_chunk_merge")
            t1 = time.monotonic()
            if shape.drifted:
                lenient(down)
            down.autocommit(False)
            n = chunk_writer.merge(down, job, staging, snapshot=snap)
        except BaseException:
            _drop_quietly(target_ep, meta, staging)  # a failed chunk leaves no staging table behind
            raise
        else:
            down.autocommit(True)
            chunk_writer.drop_staging(down, meta, staging)
        finally:
            down.close()
        log.info("%s chunk %d: %d rows staged in %.2fs, merged in %.2fs", st.name, chunk.chunk_id, n, t1 - t0,
                 time.monotonic() - t1)
        return n


def _drop_quietly(target_ep, meta, staging) -> None:
    try:
        conn = connect(target_ep, downstream=True)
        try:
            chunk_writer.drop_staging(conn, meta, staging)
        finally:
            conn.close()
    except Exception as e:  # the rerun drops it anyway; the chunk's own error matters more
        log.warning("could not drop staging table %s.%s: %s", meta, staging, e)
