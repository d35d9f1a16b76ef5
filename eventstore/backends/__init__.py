"""The storage backends behind the ``Backend`` protocol (``protocol``, with the envelope
types the store façade and every backend share): ``memory``, ``sqlite/``, ``postgres/``,
and the SQL both SQL backends use (``sql``). Each SQL backend is a package with the same
rooms for the same jobs: ``base`` (the backend class), ``append``, ``group``, ``reads``,
``snapshots``, ``fork``, ``artifacts``, ``memory_index``.

Nothing here is public API (that is ``eventstore``); a backend never imports the façade.
This package imports nothing, so importing one backend never loads another's driver.
"""
