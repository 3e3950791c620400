"""When a chunk of the full load goes again (land.Retries): each cause keeps its own count, so
deadlocks downstream cannot use up the tries a DDL upstream needs, and an error that is neither
is raised at once."""

import pytest

from dm_core.full.land import Retries
from dm_core.full.write import RETRY_MARK

DEADLOCK = RuntimeError(f"{RETRY_MARK} (1213, 'Deadlock found when trying to get lock')")
UNKNOWN_COLUMN = RuntimeError("(1054, \"Unknown column 'c' in 'SELECT'\")")
DEF_CHANGED = RuntimeError("(1412, 'Table definition has changed, please retry transaction')")
REFUSED = RuntimeError("(1366, \"Incorrect integer value: 'x' for column `t`.`a` at row 1\")")


# (failures in order, whether the table's columns changed before each, the last one's outcome)
CASES = [
    ("two deadlocks, then a DDL dropped a column", [DEADLOCK, DEADLOCK, UNKNOWN_COLUMN], [False, False, True], "again"),
    ("one DDL per step of a busy load", [UNKNOWN_COLUMN] * 6, [True] * 6, "again"),
    ("ADD INDEX under a snapshot read: same columns", [DEF_CHANGED], [False], "again"),
    ("a column error with the table unchanged is final", [UNKNOWN_COLUMN], [False], "raise"),
    ("a value the target refuses is final", [REFUSED], [False], "raise"),
    ("a fourth deadlock is final", [DEADLOCK] * 4, [False] * 4, "raise"),
    ("three deadlocks still go again", [DEADLOCK] * 3, [False] * 3, "again"),
    ("a table that never stops changing ends", [UNKNOWN_COLUMN] * 21, [True] * 21, "raise"),
]


@pytest.mark.parametrize("errors,changed,last", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_retries(errors, changed, last):
    slept = []
    again = Retries(sleep=slept.append)
    answers = [again.after(e, lambda c=c: c) for e, c in zip(errors, changed)]
    assert all(a is not None for a in answers[:-1]), answers
    assert (answers[-1] is not None) == (last == "again"), answers
    assert slept == [0.2 * n for n in range(1, 1 + sum(1 for e, a in zip(errors, answers) if e is DEADLOCK and a))]


def test_the_shape_is_asked_only_when_the_error_could_be_a_change():
    asked = []
    again = Retries(sleep=lambda s: None)
    assert again.after(DEADLOCK, lambda: asked.append(1) or True) is not None
    assert asked == []
