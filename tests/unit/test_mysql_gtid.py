"""MySQL GTID sets (dm_core/binlog/mysql_gtid.py): the text a checkpoint keeps, the binary form
of PREVIOUS_GTIDS and COM_BINLOG_DUMP_GTID (checked against mysql-replication's GtidSet and an
encoder written here from the format), and the reader's running set."""

import random
import struct

import pytest
from pymysqlreplication.gtid import GtidSet

from dm_core.binlog import mysql_gtid as mg
from dm_core.errors import ErrorCode, ShardflowError
from tests.mysql_binlog import UUID_A, UUID_B, gtid_set_bytes

A, B = UUID_A, UUID_B
C = "0aaaaaaa-0000-0000-0000-00000000000c"   # sorts first


@pytest.mark.parametrize("text, canonical, parsed", [
    ("", "", {}),
    (f"{A}:1-5", f"{A}:1-5", {A: [[1, 5]]}),
    (f"{A.upper()}:1-5", f"{A}:1-5", {A: [[1, 5]]}),
    (f"{A}:7", f"{A}:7", {A: [[7, 7]]}),
    (f"{A}:1-5:7-9,\n{B}:1-3", f"{A}:1-5:7-9,{B}:1-3", {A: [[1, 5], [7, 9]], B: [[1, 3]]}),  # the server's line break
    (f"{B}:7-9:1-5:6, {A}:3", f"{A}:3,{B}:1-9", {A: [[3, 3]], B: [[1, 9]]}),       # unsorted, touching
    (f"{A}:1-3,{A}:5,{A}:4", f"{A}:1-5", {A: [[1, 5]]}),
    (f"{A}:1-10:3-4", f"{A}:1-10", {A: [[1, 10]]}),                                   # overlapping
    (f"{A}:1-5,{C}:2", f"{C}:2,{A}:1-5", {C: [[2, 2]], A: [[1, 5]]}),
])
def test_gtid_set_text(text, canonical, parsed):
    assert mg.parse(text) == parsed and list(mg.parse(text)) == sorted(parsed)
    assert mg.normalize(text) == canonical and mg.normalize(canonical) == canonical


@pytest.mark.parametrize("text, says", [
    ("0-1-5", "is not uuid:interval"),                       # MariaDB's
    (f"{A}", "is not uuid:interval"),
    (f"{A}:0-3", "starts below 1"),
    (f"{A}:5-3", "is empty"),
    (f"{A}:x-3", "is not an interval"),
    (f"{A[:-1]}:1", "is not uuid:interval"),
    (f"{A}:mytag:1-5", "tagged GTIDs"),
])
def test_gtid_set_text_refused(text, says):
    with pytest.raises(ShardflowError) as exc:
        mg.parse(text)
    assert exc.value.code is ErrorCode.CONFIG_INVALID and says in str(exc.value)


SETS = ["", f"{A}:1-5", f"{A}:1-5:7-9:100", f"{A}:1-5,{B}:1-3:9", f"{C}:1,{A}:2-2000000000,{B}:18446744073709551614"]


@pytest.mark.parametrize("text", SETS)
def test_gtid_set_binary_form(text):
    data = mg.encode(text)
    parsed = {u: [tuple(iv) for iv in ivs] for u, ivs in mg.parse(text).items()}
    assert data == gtid_set_bytes(parsed)                    # the format, encoded independently
    if text:
        assert data == GtidSet(text).encoded()               # mysql-replication's encoder
    assert mg.decode(b"xx" + data + b"yy", 2) == (mg.normalize(text), 2 + len(data))


def test_a_tagged_binary_set_is_refused():
    data = struct.pack("<Q", 1 << 56 | 1) + bytes(40)   # MySQL 8.3+'s format byte: tagged GTIDs follow
    with pytest.raises(ShardflowError) as exc:
        mg.decode(data)
    assert exc.value.code is ErrorCode.BINLOG_UNREADABLE and "tagged GTIDs" in exc.value.workaround


def _reference(done: dict[str, set[int]]) -> str:
    out = []
    for u in sorted(done):
        nums, ivs = sorted(done[u]), []
        for n in nums:
            if ivs and n == ivs[-1][1] + 1:
                ivs[-1][1] = n
            else:
                ivs.append([n, n])
        out.append(u + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in ivs))
    return ",".join(out)


@pytest.mark.parametrize("seed", range(6))
def test_the_running_set_matches_a_plain_set_of_transactions(seed):
    """One UUID counting up (the common case), interleaved UUIDs (multi-source, a failover),
    gaps and their filling, a GTID already in the set, and a state from elsewhere mid-way."""
    rng = random.Random(seed)
    done = {A: set(range(1, 6))}
    state, s = f"{A}:1-5", mg.GtidSetState()
    nxt = {A: 6, B: 1, C: 1}
    for step in range(600):
        r = rng.random()
        u = rng.choice([A, A, A, B, C]) if r < 0.9 else rng.choice([A, B])
        gno = nxt[u] if r < 0.8 else rng.randrange(1, nxt[u] + 5)
        nxt[u] = max(nxt[u], gno + 1)
        done.setdefault(u, set()).add(gno)
        state = s.add(state, f"{u}:{gno}")
        assert state == _reference(done), (step, u, gno)
        if step % 97 == 96:   # a state the object did not produce (a PREVIOUS_GTIDS seed): parsed again
            state = str(mg.normalize(state + ","))
    assert s.add(None, f"{A}:1") is None


def test_uuid_text():
    assert mg.uuid_text(bytes.fromhex(A.replace("-", ""))) == A
