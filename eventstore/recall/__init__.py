"""Recall of past sessions: the memory service (``service``: ``MemoryService``) and the
text it indexes (``text``). Apart from the memory *backend* (``backends.memory``), with
which it shares nothing but a word. Public through ``eventstore``.
"""
