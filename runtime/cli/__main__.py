"""``python -m runtime.cli``: the same as the ``evs`` console script."""

from . import main

main()
