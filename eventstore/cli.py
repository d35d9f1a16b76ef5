"""The old name of ``eventstore.commands`` (the store's ``evs`` commands and the toolkit every
``evs`` command is built with), kept so that ``from eventstore.cli import …`` and
``python -m eventstore.cli`` go on working: the same names, the same store-only program.

New code imports ``eventstore.commands``; the ``evs`` command line itself is ``runtime.cli``.
"""

from eventstore.commands import *  # noqa: F403  (every public name of the new home)
from eventstore.commands import __all__ as __all__

if __name__ == "__main__":
    from _evs_launcher import run_then_exit
    from eventstore.commands import main

    run_then_exit(main)
