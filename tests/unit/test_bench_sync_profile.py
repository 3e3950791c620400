"""bench/sync_profile.py: the per-stage instruction counts read from callgrind_annotate's text, and
stage patterns that still name the compiled build's functions (a renamed function would silently
drop its stage from the report)."""

import re
import shutil
import subprocess

import pytest

from bench import sync_profile
from dm_core.binlog import compiled

# lines as callgrind_annotate --inclusive=yes prints them (paths shortened), with decoys: the
# non-inclusive wrapper (__pyx_pf_) and another generator of the same class
ANNOTATED = """\
--------------------------------------------------------------------------------
2,450,818,422 (100.0%)  PROGRAM TOTALS
--------------------------------------------------------------------------------
1,186,255,416 (48.40%)  /tmp/c/dm_core/binlog/window.c:__pyx_gb_7dm_core_6binlog_6window_12BinlogWindow_7generator1 [/v/window.so]
  304,098,337 (12.41%)  /tmp/c/dm_core/binlog/rowcodec.c:__pyx_pw_7dm_core_6binlog_8rowcodec_4Rows_3__call__ [/v/rowcodec.so]
  216,000,027 ( 8.81%)  /tmp/c/dm_core/sync/sqltext.c:__pyx_pw_7dm_core_4sync_7sqltext_6Filler_7fill_rows [/v/sqltext.so]
  215,125,654 ( 8.78%)  /tmp/c/dm_core/sync/sqltext.c:__pyx_f_7dm_core_4sync_7sqltext_6Filler__fill [/v/sqltext.so]
  202,379,548 ( 8.26%)  /tmp/c/dm_core/binlog/dump.c:__pyx_gb_7dm_core_6binlog_4dump_10BinlogDump_6generator [/v/dump.so]
  131,117,755 ( 5.35%)  /tmp/c/dm_core/binlog/window.c:__pyx_pw_7dm_core_6binlog_6window_3_mariadb_gtid [/v/window.so]
  108,277,230 ( 4.42%)  /tmp/c/dm_core/sync/jobplan.c:__pyx_pw_7dm_core_4sync_7jobplan_7merge [/v/jobplan.so]
   88,086,699 ( 3.59%)  /tmp/c/dm_core/sync/jobplan.c:__pyx_pw_7dm_core_4sync_7jobplan_1compact [/v/jobplan.so]
   58,194,920 ( 2.37%)  /tmp/c/dm_core/sync/jobplan.c:__pyx_pw_7dm_core_4sync_7jobplan_5regroup [/v/jobplan.so]
   46,161,605 ( 1.88%)  /tmp/c/dm_core/binlog/window.c:__pyx_gb_7dm_core_6binlog_6window_12BinlogWindow_4generator [/v/window.so]
   41,575,916 ( 1.70%)  /tmp/c/dm_core/sync/jobplan.c:__pyx_pw_7dm_core_4sync_7jobplan_3spread [/v/jobplan.so]
"""


def test_each_stage_takes_its_own_functions_inclusive_count():
    total, found = sync_profile.stages_of(ANNOTATED)
    assert total == 2_450_818_422
    assert dict(found) == {
        "reader (all of the window's loop)": 1_186_255_416,
        "  row decoding": 304_098_337,
        "  dump packets": 202_379_548,
        "  MariaDB GTID event + Txn": 131_117_755,
        "job stages: compact": 88_086_699,
        "job stages: spread": 41_575_916,
        "job stages: regroup": 58_194_920,
        "job stages: merge": 108_277_230,
        "statement text": 216_000_027,
    }


def test_a_build_without_the_compiled_modules_reports_no_stage():
    total, found = sync_profile.stages_of("12,345 (100.0%)  PROGRAM TOTALS\n 9,000 (72.9%)  ceval.c:_PyEval_EvalFrameDefault\n")
    assert total == 12_345 and all(n is None for _, n in found)


@pytest.mark.skipif(not compiled.active or shutil.which("nm") is None,
                    reason="needs the compiled build (make setup) and nm")
def test_every_stage_names_a_function_of_the_compiled_build():
    symbols = {}
    for so in compiled.build_dir().rglob("*.so"):
        names = subprocess.run(["nm", str(so)], capture_output=True, text=True).stdout.split()
        symbols[so.name.split(".")[0]] = set(names)
    for stage, pat in sync_profile.STAGES:
        module, func = re.match(r"(\w+)\\\.c:(.*)", pat).groups()
        assert any(re.fullmatch(func.removesuffix(r"\b"), s) for s in symbols.get(module, ())), \
            f"{stage}: no function of the compiled {module} matches {func}"
