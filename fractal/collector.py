"""The garbage collector's thresholds while the tool runs: a command, and a worker's runs.

A compile allocates millions of short-lived containers beside the plans and prices it keeps for
the whole run (and an explorer's worker keeps them across machines). At Python's default
thresholds, (700, 10, 10), the collector's full passes walked those tables about three times
per VGG-16 machine, 1.3 to 1.6 s of its passes in six (`python benchmarks/collector.py`;
docs/performance.md, "The garbage collector"). With a younger generation of 10,000 objects
the full passes become rare (0.4 s in all); garbage in reference cycles (the simulator's
processes and events) is still collected, in larger batches, and a run's peak memory is about
the same.
"""
from __future__ import annotations

import contextlib
import gc

__all__ = ["COLLECTOR_THRESHOLDS", "tuned_collector"]

#: (generation 0, 1, 2) thresholds of `gc.set_threshold`
COLLECTOR_THRESHOLDS = (10_000, 10, 10)


@contextlib.contextmanager
def tuned_collector():
    """`COLLECTOR_THRESHOLDS` while the block runs, the process's own thresholds again after."""
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
