"""Whether the running task's event loop may block on a job: ``INLINE``.

A loop run by a sync caller who waits for the job anyway (the LangGraph saver's sync API runs
its store's loop in the caller's own thread) loses nothing by blocking, so a backend driver
with nothing queued may run the job on that thread rather than hopping to its own and back.
A leaf module (it imports nothing of eventstore) so that an integration may set it without
reaching into a backend.
"""

from __future__ import annotations

import contextvars
from typing import Final

__all__ = ["INLINE"]

INLINE: Final = contextvars.ContextVar("eventstore_inline", default=False)
"""True in a task whose event loop may block on a job (see the module)."""
