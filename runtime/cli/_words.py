"""The CLI's words for the runtime's messages: commands, not Python functions.

The runtime's errors and pending reasons are written for library users ("supply it with
submit_response()"); a person at a terminal answers with ``evs`` commands instead.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from eventstore.commands import prog

__all__ = ["command_words", "function_words"]

_FUNCTIONS = {
    "answer_confirmation": "confirm",
    "submit_response": "respond",
    "rerun_call": "rerun",
}
_CALL = re.compile(r"\b(" + "|".join(_FUNCTIONS) + r")\([^()]*\)")


_ARG = re.compile(r"(\w+)='([^']*)'")
_TAILS = {"confirm": " --yes|--no", "respond": " --result JSON", "rerun": ""}


def function_words(text: str, words: Callable[[str], str]) -> str:
    """Return ``text`` with each runtime function call it names (``submit_response(…)``)
    replaced by ``words(name)``."""
    return _CALL.sub(lambda m: words(m.group(1)), text)


def command_words(text: str) -> str:
    """Return ``text`` with each runtime function it names (``submit_response()``) replaced by
    the ``evs`` command that does the same (``evs respond``), under the program's name as
    invoked; a call that names its session and call (``answer_confirmation(session_id='s',
    confirmation_id='c', confirmed=…)``) becomes the whole command (``evs confirm s c
    --yes|--no``)."""

    def command(match: re.Match[str]) -> str:
        name = _FUNCTIONS[match.group(1)]
        args = dict(_ARG.findall(match.group(0)))
        session = args.get("session_id")
        target = args.get("confirmation_id") or args.get("call_id")
        if session is None or target is None:
            return f"{prog()} {name}"
        return (f"`{prog()} {name} {shlex.quote(session)} {shlex.quote(target)}"
                f"{_TAILS[name]}`")

    return _CALL.sub(command, text)
