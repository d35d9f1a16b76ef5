"""The SQLite backend (sqlite3 on driver threads): ``base`` holds ``SQLiteBackend``.

The rooms both SQL backends have, by the same names for the same jobs: ``base``, ``append``,
``group`` (group commit), ``reads``, ``snapshots``, ``fork``, ``artifacts``, ``memory_index``,
``retention`` and ``open`` (opening a database, translating the driver's errors). Only SQLite
has ``driver`` (the connection thread), ``checkpoint`` (WAL checkpoints) and ``scratch`` (a
temporary index file for checks). What both do alike is ``backends/sql``'s.

Nothing is imported here: ``base`` is imported where a store is opened (``eventstore._open``),
so a room (``driver`` for migrations, ``scratch`` for ``evs verify``) loads without it.
"""
