"""The PostgreSQL backend (asyncpg): ``base`` holds ``PostgresBackend``; the rooms
``append``, ``group``, ``reads``, ``snapshots``, ``fork``, ``artifacts``,
``memory_index`` are the SQLite backend's by the same names; ``notify`` (LISTEN/NOTIFY
wake-ups) only PostgreSQL needs.
"""
