"""The CLI's words for the runtime's messages: commands, not Python functions.

The runtime's errors and pending reasons are written for library users ("supply it with
submit_response()"); a person at a terminal answers with ``evs`` commands instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from eventstore.cli import prog

__all__ = ["command_words", "function_words"]

_FUNCTIONS = {
    "answer_confirmation": "confirm",
    "submit_response": "respond",
    "rerun_call": "rerun",
}
_CALL = re.compile(r"\b(" + "|".join(_FUNCTIONS) + r")\([^()]*\)")


def function_words(text: str, words: Callable[[str], str]) -> str:
    """Return ``text`` with each runtime function call it names (``submit_response(…)``)
    replaced by ``words(name)``."""
    return _CALL.sub(lambda m: words(m.group(1)), text)


def command_words(text: str) -> str:
    """Return ``text`` with each runtime function it names (``submit_response()``) replaced by
    the ``evs`` command that does the same (``evs respond``), under the program's name as
    invoked."""
    return function_words(text, lambda name: f"{prog()} {_FUNCTIONS[name]}")
