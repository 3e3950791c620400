"""The cyclic garbage collector's young collections made rare while a window runs."""

from __future__ import annotations

import gc
from contextlib import contextmanager

# Cyclic-GC thresholds while a window runs (see rare_young_collections).
_GC_THRESHOLD = (50_000, 50, 100)


@contextmanager
def rare_young_collections():
    """Run the window with the cyclic collector's thresholds raised, then restore them.

    Why: a window allocates millions of short-lived objects (rows, jobs, statements), and
    almost none are cyclic, but at the default threshold (700 allocations) the collector
    runs every few rows and walks the batches in flight each time: about a tenth of the
    syncer's CPU on ``make bench``, in the process whose GIL bounds throughput. Cycles are
    still collected, just in larger steps. The setting is process-wide; one syncer runs
    per task process.
    """
    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(old, _GC_THRESHOLD)))
    try:
        yield
    finally:
        gc.set_threshold(*old)
