"""Named fault points for tests (as DM's ``failpoint.Inject``): kill or stall a stage at a
known place, so resume and exactly-once can be tested deterministically.

Switched on only by the environment, e.g.::

    SHARDFLOW_FAULTS="full.after_chunk_write=3"              # os._exit(97) at the 3rd hit
    SHARDFLOW_FAULTS="full.before_chunk_merge=sleep:0.5"     # sleep 0.5 s at every hit

``os._exit`` skips every finally block and atexit hook: the process ends as after SIGKILL,
without closing connections or rolling anything back itself. Counting is per process (the
full load's chunk bookkeeping runs in the Spark driver, so one counter sees every chunk).
Unset, :func:`hit` costs one dict lookup.

Points: ``full.after_chunk_write`` (a chunk is committed downstream and recorded in the
state store), ``full.before_chunk_merge`` (a chunk is staged downstream, not yet merged),
``full.after_chunk_merge`` (merged and committed downstream, not yet recorded in the store).
"""

from __future__ import annotations

import os
import sys
import threading
import time

EXIT_CODE = 97
_lock = threading.Lock()
_hits: dict[str, int] = {}


def _parse(text: str) -> dict[str, str]:
    """
    >>> _parse("a=3, b=sleep:0.5")
    {'a': '3', 'b': 'sleep:0.5'}
    """
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, action = part.partition("=")
        out[name.strip()] = action.strip()
    return out


def hit(name: str) -> None:
    """Pass fault point ``name``: exit hard at the configured hit count, or sleep."""
    action = _parse(os.environ.get("SHARDFLOW_FAULTS", "")).get(name)
    if not action:
        return
    if action.startswith("sleep:"):
        time.sleep(float(action[6:]))
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] >= int(action):
            sys.stderr.write(f"shardflow fault point {name}: exiting hard at hit {_hits[name]}\n")
            sys.stderr.flush()
            os._exit(EXIT_CODE)
