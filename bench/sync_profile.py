"""Where the incremental sync's own work goes: the bench's workload synced in this process, timed or
counted in instructions per stage.

Why: on these 2-core machines one run of `make bench --only incremental` moves by a third between
rounds, more than any change to the syncer's hot path measures. Instructions do not: the sync
under ``valgrind --tool=callgrind`` repeats within 0.3% for the same build and workload, so a
change of 1% is seen at 20,000 transactions.

    python -m bench.sync_profile                    # write 20,000 transactions, sync them, time it
    python -m bench.sync_profile --callgrind        # the same sync counted in instructions, by stage
    python -m bench.sync_profile --callgrind --reuse  # the range written last time, again

How: the workload (bench/inc_workload.py, the incremental part's mix) is written to up1 and its
range saved in the bench's work dir. It must be the last thing in up1's binlog: a window reads on
to the upstream's position, and rows written later into the recreated tables would collide
downstream (``--reuse`` refuses a range something was written after). The sync is the tuned
``Syncer`` of the incremental part, in one process. Under callgrind, every module is imported
before counting starts, counting covers ``catch_up`` only, and the stages are the inclusive counts
of the compiled modules' entry points (none under the pure-Python fallback). The downstream's
rows are checked against the upstream's union each time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time

from bench import incremental as inc
from bench.common import ServerCPU, stack_from_env, work_dir
from bench.inc_workload import SCHEMA, SHARD_TABLES, Workload, checksum, fresh_table, raw_conn, write_workload
from dm_core.db import master_position
from dm_core.position import Position

# (stage, pattern of the compiled functions whose inclusive count it is): the largest match counts
STAGES = (
    ("reader (all of the window's loop)", r"window\.c:__pyx_gb_\w*BinlogWindow_\d+generator1\b"),
    ("  row decoding", r"rowcodec\.c:__pyx_pw_\w*Rows_\d+__call__\b"),
    ("  dump packets", r"dump\.c:__pyx_gb_\w*BinlogDump_\d+generator\b"),
    ("  MariaDB GTID event + Txn", r"window\.c:__pyx_pw_\w*_mariadb_gtid\b"),
    ("job stages: compact", r"jobplan\.c:__pyx_pw_\w*jobplan_\d+compact\b"),
    ("job stages: spread", r"jobplan\.c:__pyx_pw_\w*jobplan_\d+spread\b"),
    ("job stages: regroup", r"jobplan\.c:__pyx_pw_\w*jobplan_\d+regroup\b"),
    ("job stages: merge", r"jobplan\.c:__pyx_pw_\w*jobplan_\d+merge\b"),
    ("statement text", r"sqltext\.c:__pyx_pw_\w*Filler_\d+fill_rows\b"),
)


def _range_file():
    return work_dir() / "sync_profile_range.json"


def write(events: int) -> dict:
    stack = stack_from_env()
    w = write_workload(stack.up1, events, Workload())
    rng = {"start": [w["start"].file, w["start"].pos], "end": [w["end"].file, w["end"].pos],
           "rows": w["rows"], "want": list(checksum(stack.up1, SCHEMA, SHARD_TABLES))}
    _range_file().write_text(json.dumps(rng))
    return rng


def _still_last(rng: dict) -> None:
    conn = raw_conn(stack_from_env().up1)
    try:
        at = Position(*master_position(conn)[:2])
    finally:
        conn.close()
    if at.key() != Position(*rng["end"]).key():
        sys.exit(f"up1's binlog went on after the saved range (now at {at}, the range ends at {rng['end']}): "
                 "run without --reuse to write a fresh one")


def sync(rng: dict, counted: bool) -> dict:
    """The tuned sync of ``rng`` in this process, from a clean checkpoint at its start."""
    from dm_core.state import StateStore

    stack = stack_from_env()
    start, end = Position(*rng["start"]), Position(*rng["end"])
    down = stack.down
    fresh_table(down, SCHEMA)
    text = inc.task_yaml(down, inc.TUNED)
    with StateStore(stack.state_dsn) as store:
        inc.start_task_at(store, stack.up1, text, start)
    if counted:  # what a window imports on first use would be counted as the sync's own work
        import dm_core

        for m in pkgutil.walk_packages(dm_core.__path__, "dm_core."):
            try:
                importlib.import_module(m.name)
            except Exception:  # noqa: BLE001 - a module that needs what this process lacks is not on the path
                pass
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=True)
    t0, main0 = time.monotonic(), time.thread_time()
    with ServerCPU({"downstream": down.port}) as servers:
        run = inc.catch_up(stack, text, end, None, inc.SENSOR_WINDOW_SECONDS, 1800)
    main = time.thread_time() - main0
    if counted:
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True, check=True)
    got = list(checksum(down, SCHEMA))
    return {**run, "wall": time.monotonic() - t0, "main_thread_cpu": main,
            "downstream_cpu": servers.seconds["downstream"], "rows_ok": got == rng["want"]}


def stages(out_file: str) -> tuple[int, list[tuple[str, int | None]]]:
    return stages_of(subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out_file],
                                    capture_output=True, text=True, check=True).stdout)


def stages_of(annotated: str) -> tuple[int, list[tuple[str, int | None]]]:
    """(the program's total, each of ``STAGES`` with its inclusive count or None) from the text of
    ``callgrind_annotate --inclusive=yes``."""
    total = int(re.search(r"([\d,]+) \(100\.0+%\)\s+PROGRAM TOTALS", annotated).group(1).replace(",", ""))
    found = []
    for name, pat in STAGES:
        rx = re.compile(pat)
        counts = [int(m.group(1).replace(",", "")) for line in annotated.splitlines()
                  if rx.search(line) and (m := re.match(r"\s*([\d,]+)", line))]
        found.append((name, max(counts) if counts else None))
    return total, found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sync_profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=20_000, help="single-row transactions to write (default 20,000)")
    p.add_argument("--callgrind", action="store_true", help="count instructions per stage instead of timing")
    p.add_argument("--reuse", action="store_true", help="sync the range written last time (it must still be last)")
    p.add_argument("--sync-only", action="store_true", help=argparse.SUPPRESS)   # the child under valgrind
    a = p.parse_args(argv)
    if a.sync_only:
        print(json.dumps(sync(json.loads(_range_file().read_text()), counted=a.callgrind)))
        return 0
    if a.reuse and _range_file().exists():
        rng = json.loads(_range_file().read_text())
        _still_last(rng)
    else:
        rng = write(a.events)
    if not a.callgrind:
        r = sync(rng, counted=False)
    else:
        if not shutil.which("valgrind"):
            sys.exit("valgrind is not installed (Debian package `valgrind`)")
        out = str(work_dir() / "sync_profile.callgrind")
        child = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                                sys.executable, "-m", "bench.sync_profile", "--sync-only", "--callgrind"],
                               capture_output=True, text=True)
        if child.returncode != 0:
            sys.exit(f"the sync under callgrind failed:\n{child.stderr[-3000:]}")
        r = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{rng['rows']:,} row events; sync {r['seconds']:.2f} s, process {r['cpu']:.1f} CPU-s (main thread "
          f"{r['main_thread_cpu']:.1f}, with the run's set-up), downstream {r['downstream_cpu']:.1f} CPU-s, {r['windows']} window(s), "
          f"compiled: {r['compiled']}, rows {'ok' if r['rows_ok'] else 'DIFFER from the upstream'}")
    if a.callgrind:
        total, found = stages(out)
        print(f"instructions: {total:,} ({total / rng['rows']:,.0f} per row event)")
        for name, n in found:
            print(f"  {name:36} " + (f"{n / total:6.1%}  {n:,}" if n is not None else "n/a (pure Python)"))
    return 0 if r["rows_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
