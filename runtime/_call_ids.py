"""Call ids the log can key on: unique within a session, whatever ids the model gives.

Every reader of the log pairs by call id: responses with their calls (``build_contents``,
``evs show``), confirmations with the calls they guard, pending calls, dedup and resume, and
``evs verify``. Models do not all keep ids unique: OpenAI-compatible servers (vLLM, llama.cpp,
some proxies) number the calls of each response ``call_0``, ``call_1`` …, so a later turn
repeats an earlier turn's id, and a response can even repeat an id within itself. The rule:

- a call whose id the session has not used (as a call or a response id) and that is the first
  of its id in the response keeps the model's id;
- any other call is stored under a fresh ``call-<uuid4 hex>`` id, and the model event records
  the model's own id under ``custom_metadata[PROVIDER_CALL_IDS_KEY]`` as a mapping
  ``{stored id: model's id}`` (present only when an id was replaced);
- requests are built from the log with the model's ids (``wire_call_ids`` read by
  ``build_contents``): the model sees exactly the ids it sent, for the call and its response.

Everything else (tools, ``ToolContext.function_call_id``, confirmations, ``submit_response``,
the CLI) uses the stored id only. Pure functions of the events: replay determinism holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Final

from eventstore import Event, FunctionCall
from runtime._model import ModelResponse, new_call_id

__all__ = ["PROVIDER_CALL_IDS_KEY", "session_call_ids", "unique_call_ids", "wire_call_ids"]

PROVIDER_CALL_IDS_KEY: Final = "provider_call_ids"
"""``custom_metadata`` key of a model event whose calls were given fresh ids because the model
reused ids: ``{stored call id: the id the model gave}``. Requests send the model's id back."""


def session_call_ids(events: Iterable[Event]) -> set[str]:
    """Return every call id the events use, as a call or as a response."""
    used: set[str] = set()
    for event in events:
        if event.content is None:
            continue
        for part in event.content.parts:
            if part.function_call is not None:
                used.add(part.function_call.id)
            elif part.function_response is not None:
                used.add(part.function_response.id)
    return used


def unique_call_ids(
    response: ModelResponse, used: AbstractSet[str], *, fresh_ids: bool = False
) -> tuple[ModelResponse, dict[str, str]]:
    """Return ``response`` with call ids unique in the session, and what was replaced.

    ``used`` is the session's call ids (``session_call_ids``). A call whose id is in ``used``
    or repeats an earlier call of the response gets a fresh id — every call does with
    ``fresh_ids`` (a compacted session, where ``used`` holds only the ids after the compaction);
    the mapping returned is
    ``{fresh id: the model's id}`` (empty, and ``response`` itself returned, when no id was
    replaced). Text and metadata are kept.
    """
    seen: set[str] = set()
    replaced: dict[str, str] = {}
    calls: list[FunctionCall] = []
    for call in response.function_calls:
        if fresh_ids or call.id in used or call.id in seen:
            fresh = new_call_id()
            replaced[fresh] = call.id
            call = FunctionCall(id=fresh, name=call.name, args=call.args)
        seen.add(call.id)
        calls.append(call)
    if not replaced:
        return response, replaced
    unique = ModelResponse(
        text=response.text,
        function_calls=tuple(calls),
        custom_metadata=response.custom_metadata,
    )
    return unique, replaced


def wire_call_ids(event: Event) -> Mapping[str, str]:
    """Return ``{stored call id: the model's id}`` for the calls of ``event`` that were renamed.

    Entries that do not name a call of the event, or whose id is not a non-empty string, are
    ignored: ``custom_metadata`` is free JSON, and a stray entry must not change what the model
    is sent for another event's call.
    """
    recorded = event.custom_metadata.get(PROVIDER_CALL_IDS_KEY)
    if not isinstance(recorded, Mapping) or not recorded:
        return {}
    calls = {call.id for call in event.function_calls()}
    return {
        stored: given
        for stored, given in recorded.items()
        if stored in calls and isinstance(given, str) and given
    }
