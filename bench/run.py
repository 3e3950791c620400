"""`make bench`: run the benchmarks, print a table, write
bench/results/{rules,full,validate,small_tables,fleet,incremental,page,airflow_lag}.json.

    python -m bench.run [--rule-rows N] [--full-rows N] [--full-rounds N] [--small-tables N] [--fleet-tables N]
                        [--fleet-burst N] [--inc-events N]
                        [--only rules|full|validate|small|fleet|incremental|page|lag]

The rules part (bench/rules.py: the syncer's routing + filtering + mapping on one core vs
just iterating the rows) runs first, in this process, and needs no server. The full,
validate (bench/validate.py: validation while sync runs vs a raw checksum scan, on the full
part's data set) and incremental parts need the local stack (`make stack-up`); ports and
credentials come from the environment or `scripts/stack.sh env`. Figures are raw; performance is judged by the
ratios (shardflow ÷ baseline, measured in this run on the same data), never by pass/fail
thresholds. The page part (bench/page_fleet.py) times the Migrations page of a 10,000-table
task against a 2-table one. A baseline that cannot run is reported as null with its reason. The lag part
(bench/airflow_lag.py) runs last and goes through `airflow standalone`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from bench import airflow_lag, fleet, full, incremental, page_fleet, rules, small_tables, validate
from bench.common import fmt, machine, stack_from_env, table, write_json

log = logging.getLogger("bench")


def _parse_arguments(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--rule-rows", type=int, default=500_000,
                   help="row changes run through the task rules, 2 sources x 4 schemas x 4 tables (default 500,000)")
    p.add_argument("--full-rows", type=int, default=10_000_000,
                   help="rows of the full-copy data set, spread over 2 sources x 2 schemas x 2 tables (default 10,000,000; 2,000,000 is the quick size)")
    p.add_argument("--full-rounds", type=int, default=full.ROUNDS,
                   help=f"times the full part's engines alternate, each judged by its median run (default {full.ROUNDS}; "
                        "1 for a quick look)")
    p.add_argument("--one-table-rows", type=int, default=None,
                   help="instead of the full part's 8 tables: this many rows in one table, shardflow's engines only "
                        "(bench/results/full_one_table.json): does the full phase's memory grow with a table's size?")
    p.add_argument("--small-tables", type=int, default=500,
                   help="tables of the many-small-tables copy, 200 rows each, over 2 sources (default 500)")
    p.add_argument("--fleet-tables", type=int, default=1_000,
                   help="tables of the fleet part's task, 3 rows each, over 2 sources (default 1,000; docs/benchmarks.md "
                        "has the figures at 10,000, which take about 15 minutes here)")
    p.add_argument("--fleet-burst", type=int, default=20_000,
                   help="single-row transactions a source in each of the fleet part's bursts (default 20,000)")
    p.add_argument("--inc-events", type=int, default=1_000_000,
                   help="single-row transactions of the incremental workload (default 1,000,000: 1.1M row events, "
                        "30 s or more per engine; 50,000 is the quick size)")
    p.add_argument("--only", choices=("rules", "full", "validate", "small", "fleet", "incremental", "page", "lag"),
                   help="run one part only")
    return p.parse_args(argv)


def _row(name: str, r: dict, cols: list[str]) -> list:
    if r.get("error"):
        return [name] + ["-"] * (len(cols) - 1) + ["n/a: " + r["error"].splitlines()[0][:90]]
    note = "" if r.get("rows_ok", True) else "ROW CHECK FAILED"
    if r.get("rounds_seconds"):
        note = " ".join(filter(None, [note, "median of " + " / ".join(fmt(x, 2) for x in r["rounds_seconds"]) + " s"]))
    return [name] + [r.get(c) for c in cols[:-1]] + [note]


def _ratios(ratios: dict) -> str:
    return "ratios (shardflow / baseline): " + "  ".join(f"{k} {fmt(v, 2)}" for k, v in ratios.items())


def render_rules(out: dict) -> str:
    d = out["data"]
    cols = ["seconds", "rows_per_s", "note"]
    names = {"iterate_only": "iterate only (copy each row image)",
             "shardflow_rules": "shardflow rules (RowPath.jobs)"}
    rows = [_row(names[k], r, cols) for k, r in out["results"].items()]
    for row in rows:
        row[1] = fmt(row[1], 3)
    sf = out["results"]["shardflow_rules"]
    rows[-1][-1] = rows[-1][-1] or f"kept {sf['kept']:,}, filtered {sf['filtered']:,}"
    by = sf["filtered_by"]
    cpu = f"CPU {d['cpu']}" if d.get("cpu") is not None else "unpinned"
    return (f"RULES: {d['rows']:,} row changes in {d['transactions']:,} transactions ({d['layout']}; "
            f"{d['ops']['insert']:,} insert / {d['ops']['update']:,} update / {d['ops']['delete']:,} delete), "
            f"one core ({cpu}), best of {d['repeat']}\n"
            + table(["engine", "s", "rows/s", "note"], rows)
            + f"\nfiltered: {by['block_allow']:,} block-allow-list, {by['binlog_filter']:,} binlog event filter, "
            f"{by['expression_filter']:,} expression filter; {d['plans']} table plans built in "
            f"{fmt(d['plan_seconds'] * 1000, 1)} ms (included)"
            + "\n" + _ratios(out["ratios"]))


def render_full(out: dict) -> str:
    d = out["data"]
    cols = ["seconds", "rows_per_s", "mb_per_s", "peak_rss_mb", "note"]
    names = {"mydumper_myloader": "mydumper + myloader", "outfile_load_data": "INTO OUTFILE + LOAD DATA (raw limit)",
             "raw_merge": "INTO OUTFILE + LOAD DATA into the merged table (merge's raw limit)",
             "shardflow": "shardflow (merge 8 -> 1, partition id)",
             "shardflow_copy": "shardflow (copy 8 -> 8, as baselines)",
             "shardflow_host": "shardflow on a running job host (merge)",
             "shardflow_copy_host": "shardflow on a running job host (copy)"}
    rows = [_row(names[k], r, cols) for k, r in out["results"].items()]
    extra = ""
    for key in ("shardflow", "shardflow_copy", "shardflow_host", "shardflow_copy_host"):
        sf = out["results"].get(key) or {"error": "not run"}
        if not sf.get("error") and not sf.get("skipped"):
            st = sf.get("executor_stage_seconds") or {}
            extra += (f"\n{names[key]}: prepare {fmt(sf['prepare_seconds'], 2)}s, "
                      f"{'the job on the host' if key.endswith('_host') else 'spark-submit'} "
                      f"{fmt(sf['spark_seconds'], 2)}s (load {fmt(sf['load_seconds'], 2)}s), finish "
                      f"{fmt(sf['finish_seconds'], 2)}s; executor seconds: "
                      + ", ".join(f"{k} {fmt(v, 1)}" for k, v in st.items() if k != "rows"))
    rounds = f", each engine's median of {d['rounds']} alternating rounds" if d.get("rounds", 1) > 1 else ""
    return (f"FULL COPY: {d['rows']:,} rows ({d['layout']}), {d['bytes'] / 1e6:.1f} MB as text{rounds}\n"
            + table(["engine", "s", "rows/s", "MB/s", "peak RSS MB", "note"], rows) + extra
            + "\n" + _ratios(out["ratios"]) + _by_round(out.get("ratios_by_round")))


def _by_round(by_round: dict | None) -> str:
    if not by_round:
        return ""
    return "\nby round: " + "  ".join(f"{k} " + " / ".join(fmt(v, 2) for v in vs) for k, vs in by_round.items() if vs)


def render_validate(out: dict) -> str:
    d = out["data"]
    cols = ["seconds", "rows_per_s", "note"]
    names = {"full_copy": "full copy (the bar: shardflow's full phase)",
             "raw_scan": "raw scan (sync-diff's CRC32 checksum, 9 tables at once)",
             "shardflow": "shardflow validation, while sync runs (in process)",
             "shardflow_spark_job": "shardflow validation, the DAG's spark-submit job",
             "shardflow_corrupted": "shardflow validation, 100 rows corrupted"}
    rows = []
    for k, name in names.items():
        r = out["results"].get(k) or {"error": "not run"}
        row = _row(name, r, cols)
        row[2] = fmt(row[2], 0)
        if not r.get("error") and k.startswith("shardflow"):
            row[-1] = " ".join(filter(None, [row[-1], r.get("summary", "")]))
        if k == "shardflow_corrupted" and not r.get("error"):
            row[-1] += (f"; named {r['named_expected']}/{r['corrupted']} corrupted, {r['named_unexpected']} other, "
                        f"{r['pending']} pending")
        rows.append(row)
    live = out["results"].get("live") or {}
    errors = "; ERRORS: " + "; ".join(live["errors"]) if live.get("errors") else ""
    return (f"VALIDATE: {d['rows']:,} rows ({d['layout']}), sync running, {d['writer_rows_per_s']} row changes/s "
            f"upstream ({live.get('row_changes_written', 0):,} written{errors})\n"
            + table(["engine", "s", "rows/s", "note"], rows) + "\n" + _ratios(out["ratios"]))


def render_small(out: dict) -> str:
    d = out["data"]
    cols = ["seconds", "rows_per_s", "peak_rss_mb", "note"]
    names = {"mydumper_myloader": "mydumper + myloader", "shardflow": "shardflow, spark-submit",
             "shardflow_host": "shardflow, job host (its first job)", "shardflow_host_again": "shardflow, job host (2nd job)"}
    rows = [_row(names[k], r, cols) for k, r in out["results"].items()]
    extra = ""
    for key in ("shardflow", "shardflow_host", "shardflow_host_again"):
        sf = out["results"].get(key) or {}
        if not sf.get("error"):
            stages = ", ".join(f"{k} {v:.2f}s" for k, v in (sf.get("stages") or {}).items())
            extra += (f"\n{names[key]}: prepare {fmt(sf.get('prepare_seconds'), 2)}s, Spark job "
                      f"{fmt(sf.get('spark_seconds'), 2)}s (start-up {fmt(sf.get('start_up_seconds'), 2)}s, load "
                      f"{fmt(sf.get('load_seconds'), 2)}s{'; ' + stages if stages else ''}), finish "
                      f"{fmt(sf.get('finish_seconds'), 2)}s; {sf.get('one_pass')}")
    return (f"SMALL TABLES: {d['tables']:,} tables, {d['rows']:,} rows ({d['layout']})\n"
            + table(["engine", "s", "rows/s", "peak RSS MB", "note"], rows) + extra + "\n" + _ratios(out["ratios"]))


def render_fleet(out: dict) -> str:
    d, res = out["data"], out["results"]
    rows = []
    pre = res["precheck"]
    rows.append(["precheck (every check item)", pre.get("seconds"), None,
                 "n/a: " + pre["error"][:90] if pre.get("error") else
                 ", ".join(f"{n} {k}" for k, n in sorted(pre.get("results", {}).items()))])
    rows.append(_row("full: mydumper + myloader (baseline)", res["mydumper_myloader"], ["seconds", "rows_per_s", "note"]))
    rows.append(_row("full: shardflow (prepare + Spark + finish)", res["full"], ["seconds", "rows_per_s", "note"]))
    sync = res.get("sync") or {}
    if sync.get("error"):
        rows.append(["sync", None, None, "n/a: " + sync["error"].splitlines()[0][:90]])
    else:
        first = sync["after_full"]
        rows.append(["sync: first catch-up after the full phase", first["seconds"], None,
                     "" if first.get("rows_ok") else "ROW CHECK FAILED"])
        for key, name in (("burst_2_tables", "2 tables a source"), ("burst_all_tables", "all tables")):
            r = sync[key]
            rows.append(_row(f"sync: catch-up after a burst on {name}", r, ["seconds", "rows_per_s", "note"]))
        rows.append(_row("sync: decode only the all-tables burst (baseline)", sync["decode_only"],
                         ["seconds", "rows_per_s", "note"]))
    return (f"FLEET: one task, {d['tables']:,} tables ({d['layout']}), bursts of {d['burst_per_source']:,} "
            "single-row transactions a source\n"
            + table(["phase", "s", "rows/s", "note"], rows) + "\n"
            + "ratios (baseline s / shardflow s for the copy; shardflow / baseline rows/s for the sync): "
            + "  ".join(f"{k} {fmt(v, 2)}" for k, v in out["ratios"].items()))


def render_incremental(out: dict) -> str:
    w = out["workload"]
    cols = ["seconds", "rows_per_s", "mb_per_s", "peak_rss_mb", "note"]
    names = {"decode_only": "decode only (mysql-replication)", "naive": "naive (1 statement per row)",
             "replica_single": "MariaDB replica, 1 thread", "replica_parallel": "MariaDB replica, 4 threads optimistic",
             "shardflow": "shardflow (Syncer windows, tuned)",
             "shardflow_defaults": "shardflow (default syncer settings)",
             "shardflow_dm_defaults": "shardflow (DM's default syncer settings)"}
    rows = [_row(names[k], r, cols) for k, r in out["results"].items()]
    lag = out.get("lag") or {}
    if lag.get("error"):
        lag_line = f"shardflow lag: n/a ({lag['error']})"
    elif lag:
        lag_line = (f"shardflow lag at {fmt(lag['achieved_rate_txn_per_s'])} txn/s steady load: p50 {fmt(lag['p50_s'], 3)}s, "
                    f"p99 {fmt(lag['p99_s'], 3)}s, max {fmt(lag['max_s'], 3)}s over {lag['transactions']:,} transactions")
    else:
        lag_line = "shardflow lag: n/a"
    cpu_lines = "".join(f"CPU-s, {names[k]}: " + ", ".join(f"{n} {fmt(v, 1)}" for n, v in r["cpu_seconds"].items()) + "\n"
                        for k, r in out["results"].items() if r.get("cpu_seconds"))
    return (f"INCREMENTAL: {w['rows']:,} row events in {w['transactions']:,} transactions "
            f"({w['ops']['insert']:,} insert / {w['ops']['update']:,} update / {w['ops']['delete']:,} delete rows), "
            f"{w['wide_rows']:,} of them wide rows, binlog {fmt(w['binlog_bytes'])} bytes\n"
            + table(["engine", "s", "rows/s", "binlog MB/s", "peak RSS MB", "note"], rows)
            + "\n" + cpu_lines + lag_line + "\n" + _ratios(out["ratios"]))


def render_page(out: dict) -> str:
    d = out["data"]
    rows = []
    for key, name in (("tables_2", f"2 tables ({d['tables_2']})"), ("tables_10000", f"10,000 tables ({d['tables_10000']})")):
        r = out["results"][key]
        rows.append([name, fmt(r["page_seconds"], 3), fmt(r["api_seconds"], 3), fmt(r["browser_seconds"], 3),
                     fmt(r["seconds"], 3), f"{r['html_bytes'] / 1000:.0f} KB", "median of " +
                     " / ".join(fmt(x, 2) for x in r["rounds_seconds"]) + " s"])
    return (f"MIGRATIONS PAGE: state store data + template in process, /api/tasks body, layout in headless "
            f"{d['browser']} (median of {d['rounds']})\n"
            + table(["task", "page s", "api s", "browser s", "total s", "HTML", "note"], rows)
            + f"\nratio 10,000 tables / 2 tables (total s): {fmt(out['ratios']['10000_tables_vs_2'], 2)}")


def render_lag(out: dict) -> str:
    d = out["data"]
    rows = []
    for key, name in (("airflow", "through airflow standalone (poke-mode sensor)"),
                      ("in_process", "in process (SyncSession, no Airflow)")):
        r = out["results"][key]
        rows.append([name, fmt(r["idle"]["p50_s"], 3), fmt(r["idle"]["p99_s"], 3), fmt(r["load"]["p50_s"], 3),
                     fmt(r["load"]["p99_s"], 3), fmt(r["load"]["achieved_rate_txn_per_s"]),
                     "" if r.get("rows_ok") else "ROW CHECK FAILED"])
    t = out["targets"]
    return (f"LAG: a probe row upstream → visible downstream; idle ({d['idle_probes']} probes) and under "
            f"{d['rate_txn_per_s']:.0f} txn/s for {d['load_seconds']:.0f}s\n"
            + table(["syncer", "idle p50 s", "idle p99 s", "load p50 s", "load p99 s", "txn/s", "note"], rows)
            + f"\ntargets: load p99 < 1 s {'met' if t['load_p99_under_1s'] else 'MISSED'}, idle p99 < 5 s "
            f"{'met' if t['idle_p99_under_5s'] else 'MISSED'}\n" + _ratios(out["ratios"]))


def main(argv=None) -> int:
    args = _parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="[bench] %(message)s", stream=sys.stderr)
    for noisy in ("shardflow", "pymysqlreplication", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    reports, failed = [], []
    t0 = time.monotonic()
    stack = None

    def part(name: str, what, render, filename: str) -> None:
        """One part: its report joins the others'; a part that fails is reported, and the next
        ones still run (a run takes most of an hour: one part's failure must not lose the rest)."""
        try:
            out = what()
            path = write_json(filename, out)
            reports.append(render(out) + f"\n→ {path}")
        except Exception as e:
            log.exception("the %s part failed", name)
            failed.append(name)
            reports.append(f"{name.upper()}: failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")

    if args.only in (None, "rules"):
        part("rules", lambda: {"meta": {**machine(), "rule_rows": args.rule_rows}, **rules.run(args.rule_rows)},
             render_rules, "rules.json")
    if args.only in (None, "full", "validate", "small", "fleet", "incremental", "page", "lag"):
        stack = stack_from_env()
    if args.only in (None, "full"):
        if args.one_table_rows:
            part("full", lambda: {"meta": {**machine(), "one_table_rows": args.one_table_rows},
                                  **full.run(stack, args.one_table_rows, one_table=True, rounds=1)},
                 render_full, "full_one_table.json")
        else:
            part("full", lambda: {"meta": {**machine(), "full_rows": args.full_rows},
                                  **full.run(stack, args.full_rows, rounds=args.full_rounds)},
                 render_full, "full.json")
    if args.only in (None, "validate"):
        part("validate", lambda: {"meta": {**machine(), "full_rows": args.full_rows}, **validate.run(stack, args.full_rows)},
             render_validate, "validate.json")
    if args.only in (None, "small"):
        part("small", lambda: {"meta": {**machine(), "small_tables": args.small_tables},
                               **small_tables.run(stack, args.small_tables, 200)},
             render_small, "small_tables.json")
    if args.only in (None, "fleet"):
        part("fleet", lambda: {"meta": {**machine(), "fleet_tables": args.fleet_tables, "fleet_burst": args.fleet_burst},
                               **fleet.run(stack, args.fleet_tables, args.fleet_burst)},
             render_fleet, "fleet.json")
    if args.only in (None, "incremental"):
        part("incremental", lambda: {"meta": {**machine(), "inc_events": args.inc_events},
                                     **incremental.run(stack, args.inc_events)},
             render_incremental, "incremental.json")
    if args.only in (None, "page"):
        part("page", lambda: {"meta": machine(), **page_fleet.run(stack)}, render_page, "page.json")
    if args.only in (None, "lag"):
        part("lag", lambda: {"meta": machine(), **airflow_lag.run(stack)}, render_lag, "airflow_lag.json")
    print("\n\n".join(reports) + f"\n\n(benchmarks took {time.monotonic() - t0:.0f}s)"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
