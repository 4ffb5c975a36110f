"""Pausing Python's cyclic garbage collector around loops over millions of records.

Reading a 10M-judgment plan makes a dictionary per line and keeps a few large
structures alive; the collector, triggered by allocations, walks the live ones again
and again (measured: 40% of the sampled estimate's pass at 10M judgments, design note
docs/design/producer-scale.md). The loops wrapped here make no reference cycles (what
they drop is freed by reference counting), so nothing waits on the collector meanwhile.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The collector off inside the block, on again after it if it was on (nests)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
