"""``python -m eventstore.commands``: the store's commands alone (``evs`` itself is
``runtime.cli``)."""

from _evs_launcher import run_then_exit

from . import main

run_then_exit(main)
