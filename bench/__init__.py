"""Benchmarks of shardflow against the tools it replaces, on the local stack.

`python -m bench.run` (or `make bench`) measures, on the same data in the same run:

- full copy (bench/full.py): mydumper+myloader and server-side INTO OUTFILE + LOAD DATA
  INFILE (the raw limit) vs the Spark full phase;
- incremental (bench/incremental.py, workload in bench/inc_workload.py): binlog decoding alone, a naive one-statement-per-row
  applier, MariaDB's own replica (single and parallel) vs the shardflow syncer.

Performance is reported as ratios to those baselines (shardflow ÷ baseline), never as
pass/fail: the numbers depend on the machine, the ratios much less. Results go to
bench/results/{full,incremental}.json.
"""
