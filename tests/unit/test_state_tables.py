"""The registry of the state store's tables (dm_core/state/schema.py, ``PARTS``) is the whole
truth: every table some module of dm_core creates in the state store's schema is listed under
the part that creates it, and each part serialises its creation on a lock key of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dm_core.state.schema import PARTS, lock_key

ROOT = Path(__file__).resolve().parents[2]
_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS \{(?:s|SCHEMA)\}\.(\w+)")


def _module_file(owner: str) -> Path:
    return ROOT / (owner.replace(".", "/") + ".py")


def test_every_state_table_is_registered_under_the_module_that_creates_it():
    created = {}
    for f in sorted((ROOT / "dm_core").rglob("*.py")):
        for name in _CREATE.findall(f.read_text()):
            created[name] = str(f.relative_to(ROOT))
    registered = {t: str(_module_file(p.owner).relative_to(ROOT)) for p in PARTS.values() for t in p.tables}
    assert len(created) >= 15, "the walk found the state store's tables"
    assert created == registered


def test_each_part_has_its_own_lock_key():
    keys = [p.lock_key for p in PARTS.values()]
    assert len(set(keys)) == len(keys), keys
    assert lock_key("online_ddl") == PARTS["online_ddl"].lock_key
    with pytest.raises(ValueError, match="full_plan"):   # a raw key is no name: the error lists the parts
        lock_key(PARTS["full_plan"].lock_key)
