"""What the shard DDL coordinator's pokes log (plugins/shardflow_airflow/sensors.py ``locks_news``):
pokes come every 2 s into one task log, so a lock table is shown when it changes, not every poke."""

import pytest

A = '[{"id": "t1-`db`.`t`", "synced": ["s1"]}]'
B = '[{"id": "t1-`db`.`t`", "synced": ["s1", "s2"]}]'


@pytest.mark.parametrize("before, now, news", [
    (None, A, "changed"),      # the first poke of a run (or the Variable unreadable): shown
    (A, A, None),              # unchanged: nothing
    (A, B, "changed"),         # a source arrived at the lock: shown again
    (B, "[]", "resolved"),     # the last lock resolved: said once
    ("[]", "[]", None),
    (None, "[]", None),        # nothing ever active: nothing to say
])
def test_a_lock_table_is_logged_when_it_changes(before, now, news):
    from shardflow_airflow.sensors import locks_news

    assert locks_news(before, now) == news
