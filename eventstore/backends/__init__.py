"""The storage backends behind the ``Backend`` protocol (``protocol``, re-exporting the
envelope types the store façade and every backend share, ``records``, and the rules every
backend judges by, ``rules``): ``memory/``, ``sqlite/``, ``postgres/``, and the SQL backends'
shared base (``sql/``: ``SQLBackendBase``, which both inherit, and the columns and converters
both use). Each backend is a package with the same rooms for the same jobs: ``base`` (the
backend class), ``append``, ``group``, ``reads``, ``snapshots``, ``fork``, ``artifacts``,
``memory_index`` (the memory backend has the ones it needs).

Nothing here is public API (that is ``eventstore``); a backend never imports the façade.
This package imports nothing, so importing one backend never loads another's driver.
"""
