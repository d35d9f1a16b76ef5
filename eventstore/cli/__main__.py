"""``python -m eventstore.cli``: the store-only commands (the ``evs`` script is ``runtime.cli``)."""

from . import main

main()
