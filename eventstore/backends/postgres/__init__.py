"""The PostgreSQL backend (asyncpg): ``base`` holds ``PostgresBackend``.

The rooms both SQL backends have, by the same names for the same jobs: ``base``, ``append``,
``group`` (grouped appends), ``reads``, ``snapshots``, ``fork``, ``artifacts``,
``memory_index``, ``retention`` and ``open`` (connecting, translating the driver's errors).
Only PostgreSQL has ``notify`` (LISTEN/NOTIFY wake-ups), ``replicas`` (reads on hot standbys)
and ``keepalive`` (silent connections fail in time). What both do alike is ``backends/sql``'s.

Nothing is imported here: ``base`` is imported where a store is opened (``eventstore._open``),
so a room loads without it (and without asyncpg, the ``postgres`` extra, where it needs none).
"""
