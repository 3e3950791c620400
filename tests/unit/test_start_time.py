"""`--start-time` (dm_core/binlog/by_time.py): DM's three spellings, and an error naming the
flag and the spellings for anything else. Finding the position on a server is tested on real
ones: tests/dm_cases/test_start_task.py, tests/e2e/test_start_time_through_airflow.py."""

import datetime

import pytest

from dm_core.binlog.by_time import instant, parse_start_time
from dm_core.errors import ErrorCode, ShardflowError

H = datetime.timedelta(hours=1)


@pytest.mark.parametrize("text, local, offset", [
    ("2021-10-21 00:01:00", datetime.datetime(2021, 10, 21, 0, 1), None),
    ("2021-10-21T00:01:00", datetime.datetime(2021, 10, 21, 0, 1), None),
    ("  2021-10-21 00:01:00 ", datetime.datetime(2021, 10, 21, 0, 1), None),
    ("2021-10-21T00:01:00+08:00", datetime.datetime(2021, 10, 21, 0, 1), 8 * H),
    ("2021-10-21T00:01:00-05:30", datetime.datetime(2021, 10, 21, 0, 1), -5.5 * H),
    ("2021-10-21T00:01:00Z", datetime.datetime(2021, 10, 21, 0, 1), 0 * H),
])
def test_dm_spellings(text, local, offset):
    got = parse_start_time(text)
    assert (got.local, got.offset, got.text) == (local, offset, text.strip())


@pytest.mark.parametrize("text", [
    "yesterday", "2021-10-21", "2021-10-21 00:01", "2021-10-21 00:01:00.5", "2021-13-01 00:00:00",
    "2021-10-21 24:00:00", "21-10-21 00:01:00", "2021-10-21 00:01:00 +08:00", "",
])
def test_anything_else_names_the_flag_and_the_spellings(text):
    with pytest.raises(ShardflowError) as e:
        parse_start_time(text)
    assert e.value.code is ErrorCode.CONFIG_INVALID
    assert "--start-time" in str(e.value) and "'2021-10-21T00:01:00+08:00'" in str(e.value)


def test_an_offset_needs_no_server():
    assert instant(None, parse_start_time("1970-01-01T08:00:01+08:00")) == 1
    assert instant(None, parse_start_time("2021-10-21T00:01:00Z")) == 1634774460
