"""The store façade: ``EventStore`` (assembled in ``facade``) and the rooms it mixes in —
``addressing`` (lifecycle, event loop, which key a session is stored under), ``sessions``,
``appends`` (encoding, append, compaction), ``reads`` (events and mappings), ``state`` (state
and session caches), ``artifacts``, ``fork`` and ``retention``. It checks arguments, encodes
events for the backend and knows no SQL. Public through ``eventstore``.
"""
