"""``python -m eventstore.cli``: the store-only commands (the ``evs`` script is ``runtime.cli``)."""

from _evs_launcher import run_then_exit

from . import main

run_then_exit(main)
