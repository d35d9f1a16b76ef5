"""The SQLite backend (sqlite3 on a writer thread): ``base`` holds ``SQLiteBackend``;
the rooms ``append``, ``group`` (group commit), ``reads``, ``snapshots``, ``fork``,
``artifacts``, ``memory_index`` are the PostgreSQL backend's by the same names;
``driver`` (the connection thread), ``checkpoint`` (WAL checkpoints) and ``open``
(opening and migrating a file) only SQLite needs.
"""
