"""Stage 4, write, on a Spark executor: one chunk's rows into the target with its marker in
one downstream transaction (chunk_writer.py says why that lands each chunk exactly once).

Each function here returns the function Spark maps over the chunk's partition (one
partition a chunk), built from one :class:`ChunkJob`, the record that travels to the
executor. Which of them a chunk takes is the driver's choice (land.py):

- :func:`text_writer` (the default): the executor reads the chunk's ready lines from the
  upstream (text_rows.py) and pipes them into ``LOAD DATA`` untouched (load_data.py);
- :func:`arrow_writer`: Spark's JDBC source read the chunk (jdbc_read.py); its Arrow batches
  are encoded to LOAD DATA text here (load_data.encode);
- :func:`rows_writer` (``--write-mode rows``): pymysql executemany (chunk_writer.write_rows);
- :func:`text_to_staging`: a keyless table's chunk read in a consistent snapshot
  (snapshot_read.py) into its staging table, which the driver then merges
  (chunk_writer.merge).
"""

from __future__ import annotations

from dataclasses import dataclass, field

RETRY_MARK = "[shardflow: retry chunk]"   # an error the driver answers by reading the chunk again
STATS_SCHEMA = ("rows long, read double, encode double, write double, wait double, load double, finish double, "
                "spooled long")           # what arrow_writer yields: load_data.LoadStats as a Spark schema


@dataclass(frozen=True)
class ChunkJob:
    """One chunk's write, as the executor needs it. ``columns``: the target columns in the
    order the rows carry them; ``types``: upstream column → type (load_data.statement);
    ``drifted``: the table changed upstream since the target was made (lenient writes,
    dm_core/full/phase.py); ``turn``: the target's write turns, or None (load_data.py);
    ``same_bytes``: every text value is in its column's charset already (LOAD DATA reads the
    lines as binary). The text path's ``up_ep`` / ``query`` / ``at_snapshot`` say where the
    lines come from and whether the read records its binlog position (snapshot_read.py)."""

    target_ep: object
    meta: str
    st: object                      # dm_core.full.discover.SourceTable
    columns: tuple[str, ...]
    verb: str
    plan_id: str
    chunk_id: int
    task_name: str
    drifted: bool = False
    types: dict = field(default_factory=dict)
    turn: tuple[str, ...] | None = None
    same_bytes: bool = False
    up_ep: object = None
    query: str | None = None
    at_snapshot: bool = False
    batch: int = 10_000             # rows per executemany call (rows_writer)

    @property
    def charset(self) -> str:
        """How LOAD DATA reads the lines (load_data.statement)."""
        return "binary" if self.same_bytes else "utf8mb4"


def write_chunk(job: ChunkJob, items, encoder=None, *, enclosed: bool = False, snapshot: dict | None = None) -> dict:
    """``items`` through one LOAD DATA into the target plus the chunk's marker, one transaction.
    ``enclosed``: the text path's lines (quoted strings); ``snapshot``: the dict the read fills
    with its binlog position, for the marker. Returns the stage timings (load_data.LoadStats)."""
    from dm_core import faults
    from dm_core.db import connect_native
    from dm_core.full import chunk_writer, load_data
    from dm_core.full.extract import lenient

    st = job.st
    conn = connect_native(job.target_ep, local_infile=True)
    try:
        conn.autocommit(False)
        if job.drifted:
            lenient(conn)

        def marker(rows):
            faults.hit("full.before_chunk_merge")
            with conn.cursor() as cur:
                chunk_writer.insert_marker(cur, job.meta, chunk_writer.mark_of(job), rows, snapshot)

        sql = load_data.statement(st.target_schema, st.target_table, list(job.columns), job.verb, job.types,
                                  enclosed=enclosed, charset=job.charset)
        try:
            stats = load_data.load_chunk(conn, sql, items, marker, encoder=encoder,
                                         duplicates_fail=job.verb == "INSERT", turn=job.turn)
        except Exception as e:
            code = (getattr(e, "args", ()) or (None,))[0]
            if code in chunk_writer.RETRYABLE:  # the driver reads the chunk again
                raise RuntimeError(f"{RETRY_MARK} {e}") from None
            raise
        faults.hit("full.after_chunk_commit")   # committed; `errno:2013`: the client never heard so
    finally:
        conn.close()
    return vars(stats)


def text_writer(job: ChunkJob):
    """mapPartitions function of the default path: the chunk's lines read from the upstream,
    in a consistent snapshot whose position the marker records when ``job.at_snapshot``."""

    def write(chunk_ids):
        _drain(chunk_ids)
        from dm_core.db import connect_native
        from dm_core.full import text_rows
        from dm_core.full.reconnect import marking

        with marking():
            up = connect_native(job.up_ep, downstream=False)
            snap = {} if job.at_snapshot else None
            try:
                got = write_chunk(job, text_rows.read_lines(up, job.query, snap), text_rows.as_text, enclosed=True,
                                  snapshot=snap)
            finally:
                up.close()
        yield got

    return write


def arrow_writer(job: ChunkJob):
    """mapInArrow function of the JDBC path: the chunk's Arrow batches, encoded here."""

    def write(batches):
        import pyarrow as pa

        from dm_core.full.reconnect import marking

        with marking():
            got = write_chunk(job, batches)
        yield pa.record_batch({k: [v] for k, v in got.items()})

    return write


def rows_writer(job: ChunkJob):
    """mapPartitions function of ``--write-mode rows``: the chunk's rows + marker, one transaction."""

    def write(rows):
        from dm_core.db import connect
        from dm_core.full.chunk_writer import write_rows
        from dm_core.full.reconnect import marking

        with marking():
            conn = connect(job.target_ep, autocommit=False, downstream=True)
            try:
                with conn.cursor() as cur:
                    cur.execute("SET SESSION time_zone = '+00:00'")
                got = write_rows(conn, job, rows)
            finally:
                conn.close()
        yield got

    return write


def text_to_staging(job: ChunkJob, staging: str):
    """mapPartitions function of a keyless table's staging path: the chunk's lines, read in a
    consistent snapshot (snapshot_read.py), through LOAD DATA into its staging table; yields
    the rows and the snapshot's binlog position for the merge's marker. The staging table is
    emptied first, so a retried task or a server that commits LOAD DATA in pieces (TiDB) adds
    no row twice."""

    def write(chunk_ids):
        _drain(chunk_ids)
        from dm_core.full.reconnect import marking

        with marking():
            got = _stage_chunk(job, staging)
        yield got

    return write


def _stage_chunk(job: ChunkJob, staging: str) -> dict:
    from dm_core.db import connect_native, qt
    from dm_core.full import load_data, text_rows
    from dm_core.full.extract import lenient

    up = connect_native(job.up_ep, downstream=False)
    snap: dict = {}
    try:
        conn = connect_native(job.target_ep, local_infile=True)
        try:
            with conn.cursor() as cur:   # a retried task (or a load committed in pieces) left rows
                cur.execute(f"DELETE FROM {qt(job.meta, staging)}")
            conn.autocommit(False)
            if job.drifted:
                lenient(conn)
            sql = load_data.statement(job.meta, staging, list(job.columns), "INSERT", job.types, enclosed=True,
                                      charset=job.charset)
            stats = load_data.load_chunk(conn, sql, text_rows.read_lines(up, job.query, snap), encoder=text_rows.as_text)
        finally:
            conn.close()
    finally:
        up.close()
    return {"rows": stats.rows, "snapshot": snap}


def _drain(chunk_ids) -> None:
    """Read the partition's one element to the end: a Python worker that leaves input unread
    exits after the task instead of serving the next one (a new process and imports per
    chunk, ~0.2 s)."""
    for _ in chunk_ids:
        pass
