"""The cyclic garbage collector around a long decode: paused while it runs, and what it built
moved straight to the oldest generation.

A long read builds many small container objects (mappings, lists, an adapter's models) that
the caller keeps. With the collector running, every generation-0 and then generation-1
collection traverses them before they settle in the oldest generation, where the survivors of
a load end up anyway; on a 10,000-event ADK ``get_session`` those two traversals were about half
the load's time. So for a batch of more than ``LONG_BATCH`` items ``pause`` stops the collector,
and ``resume`` first moves every object tracked in the young generations to the oldest one
without traversing them (``gc.freeze()`` followed by ``gc.unfreeze()``: both only splice the
collector's lists) and then starts it again.

What that changes for the rest of the process: nothing is kept alive longer by reference
counting (objects are freed as soon as they are dropped, whatever their generation); only
garbage *cycles* created just before the read wait for the next full collection instead of the
next young one. Neither step is taken when the collector was disabled by the caller, and the
move is skipped when the process holds frozen objects of its own (``gc.get_freeze_count()``):
``gc.unfreeze()`` would thaw them. Nor is it made on a free-threaded build, whose collector has
no young generations and whose ``gc.freeze()`` walks the whole heap.
"""

from __future__ import annotations

import gc
import sysconfig
from typing import Final

__all__ = ["LONG_BATCH", "pause", "resume"]

_GENERATIONAL: Final = not sysconfig.get_config_var("Py_GIL_DISABLED")
"""Whether the collector has generations to move objects between (not free-threaded)."""

LONG_BATCH: Final = 256
"""Batches of at most this many items run with the collector as it is."""


def pause(items: int) -> bool:
    """Pause the collector for a batch of ``items`` if it is long and the collector running;
    return whether it was paused (hand that to ``resume``)."""
    if items <= LONG_BATCH or not gc.isenabled():
        return False
    gc.disable()
    return True


def resume(paused: bool) -> None:
    """End what ``pause`` started: the young generations moved to the oldest (see the module
    docstring), then the collector running again. Does nothing when ``paused`` is False."""
    if not paused:
        return
    if _GENERATIONAL and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    gc.enable()
