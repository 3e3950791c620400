"""DM's `print_status` case (pingcap/tiflow dm/tests/print_status/run.sh), with DM's own task and
source files (conf/, vendored unchanged: task-mode all, `chunk-filesize: 0`, `extra-args:
--statement-size=4000`, `enable-relay: true` warned) and our own statements: `print_status`.`t_1`,
a wide row as DM's (VARCHAR, CHAR, DATETIME, unsigned BIGINT, FLOAT, ENUM, SET, TIMESTAMP
defaults), 300 rows before the task; then 92 groups of changes through the binlog (inserts,
updates, deletes, one ADD COLUMN), as DM's 92 groups of binlog events.

DM greps its worker's log for what an operator reads while a task runs: the dump's and the
load's progress with a speed that is not zero, the load's finished = total bytes, and the
syncer's status lines (total rows, rows per second, the master's position). What is checked
here, in what shardflow writes to the task logs:

1. the full phase's job log (spark-submit's output, the dm_<task>_full task log): a line per
   chunk with its rows and seconds, and the total: every row, in how many chunks, at a rows/s
   that is not zero;
2. the sync's step messages (the dm_<task>_incremental sensor's log): per window the rows and
   transactions applied, the checkpoint moved from → to, the upstream's position, safe mode,
   rows/s not zero and the lag; the rows of all windows add up to the rows written, and the
   last window ends at the upstream's position;
3. downstream equals upstream (DM: check_sync_diff).

Not ported: DM's failpoints that slow the load and the syncer down so that status lines are
printed mid-way (shardflow says per chunk and per window, not on a timer), relay.
"""

import re

import pytest

from .harness import Sync, checked_prepare, dm_case, register_sources, run_sql, table_rows

pytestmark = pytest.mark.integration

DB = "print_status"
S1 = "mysql-replica-01"
COLUMNS = ["id", "c1", "c2", "CAST(c3 AS CHAR)", "c4", "c5", "c6", "c7", "c12", "c14"]


@pytest.fixture
def case(stack, tmp_path):
    with dm_case(DB, tmp_path, stack, {"source1.yaml": "up1"}, {"up1": [DB], "down": [DB, "dm_meta"]}) as got:
        yield got


def _row(i: int) -> str:
    return (f"({i}, 'name-{i}', 'note {i} ' , '2024-01-{1 + i % 28:02d} 10:{i % 60:02d}:00', {i * 1000003}, "
            f"{i / 7:.3f}, {i % 2}, 'c7-{i}', 'c8-{i}', {i % 2}, '{'abc'[i % 3]}', 'v{i}', '{'a,b' if i % 2 else 'c'}')")


def test_dm_print_status_case(case, stack):
    from dm_core.full.phase import finish
    from tests.integration.test_full_support import run_load

    files, store = case
    up, down = stack["up1"], stack["down"]
    run_sql(up, f"CREATE DATABASE {DB}",
            f"""CREATE TABLE {DB}.t_1 (
                  id bigint(20) NOT NULL, c1 varchar(60) NOT NULL, c2 varchar(74) NOT NULL, c3 datetime NOT NULL,
                  c4 bigint(20) unsigned NOT NULL, c5 float NOT NULL, c6 tinyint(1), c7 char(104) NOT NULL,
                  c8 char(166) NOT NULL, c9 timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
                  c10 tinyint(1), c11 timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, c12 enum('a','b','c') NOT NULL,
                  c13 varchar(13) NOT NULL, c14 set('a','b','c') NOT NULL, PRIMARY KEY (id))""",
            *[f"INSERT INTO {DB}.t_1 (id, c1, c2, c3, c4, c5, c6, c7, c8, c10, c12, c13, c14) VALUES "
              + ", ".join(_row(i) for i in range(k, k + 50)) for k in range(1, 301, 50)])
    register_sources(files)
    task = checked_prepare(files, store)
    r = run_load(task.name)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    finish(task, store)

    # 1. the full phase says each chunk and the total, with a speed
    chunks = re.findall(rf"{S1}:{DB}\.t_1 chunk \d+: (\d+) rows loaded in ([\d.]+)s", log)
    assert chunks and sum(int(n) for n, _ in chunks) == 300, log[-4000:]
    total = re.search(r"full load of test: (\d+) rows in (\d+) chunks in ([\d.]+)s \((\d+) rows/s", log)
    assert total and int(total[1]) == 300 and int(total[2]) == len(chunks) and int(total[4]) > 0, log[-4000:]

    # 2. 92 groups of changes through the binlog; the sync says each window
    stmts = []
    for g in range(92):
        i = 1000 + g
        if g == 46:
            stmts.append(f"ALTER TABLE {DB}.t_1 ADD COLUMN c16 int DEFAULT 7")
        elif g % 4 == 3:
            stmts.append(f"DELETE FROM {DB}.t_1 WHERE id = {g + 1}")
        elif g % 4 == 2:
            stmts.append(f"UPDATE {DB}.t_1 SET c1 = 'changed-{g}', c12 = 'c' WHERE id = {g + 100}")
        else:
            stmts.append(f"INSERT INTO {DB}.t_1 (id, c1, c2, c3, c4, c5, c6, c7, c8, c10, c12, c13, c14) "
                         f"VALUES {_row(i)}")
    run_sql(up, *stmts)
    sync = Sync(task, store)
    assert set(sync.settle().values()) == {"caught_up"}
    lines = [m for m in sync.said if m.startswith(f"source {S1}: ")]
    assert lines, "the sync said nothing"
    windows = [re.match(rf"source {S1}: (\d+) rows in (\d+) transactions, (\(.*?\)) → (\(.*?\)) "
                        r"\(upstream at (\(.*?\))\), safe mode (on|off), ([\d.]+)s( \(([\d,]+) rows/s\))?(, lag [\d.]+s)?",
                        m) for m in lines]
    assert all(windows), lines
    assert sum(int(w[1]) for w in windows) == 91, lines          # 91 row changes and one DDL
    assert any(w[9] and int(w[9].replace(",", "")) > 0 for w in windows), lines
    assert windows[-1][4] == windows[-1][5], lines                # the last window ends at the upstream's position
    assert any("DDL: ALTER TABLE" in m and "ADD COLUMN" in m for m in lines), lines

    # 3. downstream equals upstream
    assert table_rows(down, DB, "t_1", COLUMNS + ["c16"]) == table_rows(up, DB, "t_1", COLUMNS + ["c16"])
