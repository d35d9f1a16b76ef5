"""What memory remembers of an event, and how a query becomes search terms (pure functions).

An event's memory text: its text parts; each function call as ``<name> called with <args>``;
each function response as ``<name> returned <response>`` (JSON, keys sorted). Events without
any of these (claims, state-only events) and partial events are not remembered. A query's terms
are its distinct lower-case words (letters and digits; ``_`` and punctuation separate words),
at most ``MAX_TERMS``; a row matches when one of its words *starts with* any of them (so
"train" finds "trains"; there is no stemming), as the database tokenizers (SQLite ``unicode61``,
PostgreSQL ``simple``) see words.
"""

from __future__ import annotations

import re

import orjson

from eventstore._events import Event

__all__ = ["MAX_TERMS", "event_memory_text", "query_terms", "words"]

MAX_TERMS = 32
"""Most search terms taken from one query (the first ones)."""

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The lower-case words of ``text``, in order (with repeats)."""
    return [w.casefold() for w in _WORD.findall(text)]


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query``, in first-seen order, at most ``MAX_TERMS``."""
    seen: dict[str, None] = {}
    for word in words(query):
        seen.setdefault(word, None)
        if len(seen) == MAX_TERMS:
            break
    return list(seen)


def _json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()


def event_memory_text(event: Event) -> str:
    """The text memory keeps of ``event`` ('' when nothing: then it is not remembered)."""
    if event.partial or event.content is None:
        return ""
    pieces: list[str] = []
    for part in event.content.parts:
        if part.text:
            pieces.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            pieces.append(f"{call.name} called with {_json(dict(call.args))}")
        elif part.function_response is not None:
            answer = part.function_response
            pieces.append(f"{answer.name} returned {_json(answer.response)}")
    return "\n".join(pieces)
