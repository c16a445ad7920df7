"""Process-wide tuning for a long-running service process (the worker applies it at start-up)."""

from __future__ import annotations

import gc


def tune_gc(young_threshold: int) -> None:
    """Take what start-up allocated out of the cyclic garbage collector's sight and collect less often.

    CPython's collector runs a young collection every ``threshold0`` net container allocations (700 by
    default) and an old one every 100 of those, each walking every object that survived. A worker under
    load allocates a few hundred containers per message (aiohttp's request and response, the entries,
    futures and events), nearly all freed by reference counting, and keeps tens of thousands of buffered
    messages alive: measured, the default collector took a quarter of the worker's CPU. ``gc.freeze()``
    moves the modules, settings and clients built at start-up to the permanent generation (the old
    collections stop walking them), and a larger young threshold lets most short-lived objects die by
    reference count before a collection sees them. Reference cycles are still collected, only later.
    ``young_threshold`` 0 leaves the collector as it is.
    """
    if young_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
