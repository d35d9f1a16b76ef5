"""The in-memory backend: the same contract as the SQL backends, for tests and prototypes.

A package with the SQL backends' room names for the same jobs: ``base`` (``MemoryBackend``:
sessions, appends, reads, forks, retention), ``snapshots``, ``artifacts``, ``memory_index``,
over ``data`` (what it holds).
"""

from .base import MemoryBackend

__all__ = ["MemoryBackend"]
