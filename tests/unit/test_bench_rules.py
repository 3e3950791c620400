"""bench/rules.py: the rules benchmark runs without servers and drops exactly the rows its task says."""

from bench import rules


def test_rules_benchmark_counts_match_the_generated_data():
    out = rules.run(2000)

    # What the task file implies, counted from the rows themselves (independent of the rules):
    # shard_*.tmp_* is on the block list, deletes on t_3 are ignored by the binlog event
    # filter, inserts with amount < 0 are dropped by the expression filter.
    blocked = binlog = expr = kept = n = 0
    for txns in rules.generate(2000).values():
        for txn in txns:
            for ch in txn.rows:
                n += 1
                if ch.table == "tmp_events":
                    blocked += 1
                elif ch.table == "t_3" and ch.op == "delete":
                    binlog += 1
                elif ch.op == "insert" and ch.after["amount"] < 0:
                    expr += 1
                else:
                    kept += 1
    assert n == 2000 and min(blocked, binlog, expr) > 0

    sf = out["results"]["shardflow_rules"]
    assert out["data"]["rows"] == 2000 and out["data"]["tables"] == 32
    assert (sf["kept"], sf["filtered"]) == (kept, blocked + binlog + expr)
    assert sf["filtered_by"] == {"block_allow": blocked, "binlog_filter": binlog, "expression_filter": expr}
    assert sf["rows_ok"] is True

    ratio = out["ratios"]["vs_iterate_only"]
    assert isinstance(ratio, float) and ratio > 0
    for r in out["results"].values():
        assert r["seconds"] > 0 and r["rows_per_s"] > 0


def test_partition_id_and_extract_columns_on_a_mapped_row():
    syncer = rules.syncers(rules.parse())["mysql-02"]
    row = {"id": 42, "name": "n", "amount": rules.Decimal("1.50"), "created": None, "flag": 0, "note": None}
    txn = rules.Txn(rules.Position("mysql-bin.000001", 4), [rules.RowChange("insert", "shard_3", "t_2", None, row)])
    (job,) = syncer.jobs(txn, False)
    assert (job.target.schema, job.target.table) == ("merged", "orders")
    assert job.after == {**row, "id": 2 << 59 | 3 << 52 | 2 << 44 | 42, "c_table": "2", "c_schema": "3", "c_source": "02"}
    negative = rules.RowChange("insert", "shard_3", "t_2", None, {**row, "amount": rules.Decimal("-1")})
    assert syncer.jobs(rules.Txn(txn.end, [negative]), False) == []
