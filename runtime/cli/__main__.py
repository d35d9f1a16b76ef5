"""``python -m runtime.cli``: the same as the ``evs`` console script."""

from _evs_launcher import run_then_exit

from . import main

run_then_exit(main)
