"""The error registry (dm_core/errors.py): one number per code, a workaround for each, and
the exception class -- not the message -- says whether a retry can help."""

import pytest

from dm_core.errors import ErrorCode, Terminal, Transient
from dm_core.shardddl import errors as shard_errors


def test_numbers_are_unique_and_every_code_says_what_to_do():
    numbers = [c.number for c in ErrorCode]
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)
    assert all(c.workaround.strip() for c in ErrorCode)


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_the_class_carries_retryability(code):
    e = code.error("x")
    assert isinstance(e, Terminal if code.terminal else Transient)
    assert str(e).startswith(f"[code={code.number}:{code.klass}] x") and code.workaround in str(e)


@pytest.mark.parametrize("cls", [shard_errors.ShardDDLUnsupported, shard_errors.ShardDDLInconsistent,
                                 shard_errors.ShardDDLConflict, shard_errors.ShardDDLLockError,
                                 shard_errors.ShardDDLExecUnknown])
def test_shard_ddl_errors_take_their_workaround_from_the_registry(cls):
    e = cls("m")
    assert isinstance(e, Terminal) and e.workaround == cls.code.workaround
    assert cls("m", workaround="do this").workaround == "do this"
