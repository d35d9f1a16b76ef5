"""Compaction of an OpenAI Agents SDK session kept in the event store (docs/frameworks.md).

The SDK's ``OpenAIResponsesCompactionSession`` compacts by clearing its underlying session and
adding the summary items back: the history beyond the summary is gone from that store.
``EventStoreSession`` records a compaction instead, as one atomic append of

- a *compaction event*: the store's own compaction (``actions.compaction``, kind
  ``compaction``) standing for every event up to the head it was made at, its summary the
  text of the summary items, and ``custom_metadata["openai_agents"] == {"compaction": k}``;
- then one item event per summary item (``{"item": <the item>}``), ``k`` of them, in the
  SDK's own shape (what ``responses.compact`` returns: ``{"type": "compaction", ...}`` items
  and the kept user messages).

A read of the items stops at the newest compaction event as it stops at a clear, so
``get_items()`` is the summary items plus the items added after them, while ``evs show`` and
``evs export`` still see every item ever added.

This module holds what is not the session itself: the request a compactor gets, the compactor
protocol, ``ResponsesCompactor`` (OpenAI's ``responses.compact``), and the pure helpers the
session uses to decide and record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agents.memory.openai_responses_compaction_session import (
    _normalize_compaction_output_items,
    _strip_orphaned_assistant_ids,
)

from eventstore import Content, Part, StoreUsageError

__all__ = ["CompactionRequest", "Compactor", "ResponsesCompactor", "summary_content",
           "unanswered_calls"]

CompactionMode = Literal["input", "previous_response_id"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRequest:
    """What a compactor is asked to summarize: the session's items at head at ``version``."""

    session_id: str
    """The SDK session id."""
    items: tuple[Any, ...]
    """The items at head, oldest first, as the SDK sends them to the API (SDK-only metadata
    removed: ``normalize_input_items_for_api``)."""
    version: int
    """The log's seq these items were read at; the compaction stands for the events up to it."""
    response_id: str | None = None
    """The newest model response id the Runner gave (``None`` for an explicit call)."""
    mode: CompactionMode | None = None
    """The mode the caller asked for (``compaction_mode`` of the SDK's arguments; ``None``
    for ``"auto"`` or when not given): the compactor picks."""
    wrapper: Any = None
    """The run's ``RunContextWrapper`` when the Runner asked (its ``usage`` may be added to)."""


class Compactor(Protocol):
    """Makes the summary items that stand for a session's items (the SDK's item shape)."""

    async def __call__(self, request: CompactionRequest) -> Sequence[Any]:
        """The summary items for ``request.items``, oldest first (mappings or SDK models)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesCompactor:
    """A compactor calling OpenAI's ``responses.compact``, as the SDK's compaction session does.

    ``client`` is an ``AsyncOpenAI`` (default: the SDK's default client, else a new one);
    ``mode`` ``"input"`` (default) sends the stored items, which this store holds whole;
    ``"previous_response_id"`` lets the server use its own chain for the Runner's newest
    response (a request without one raises StoreUsageError). The billed usage is added to
    the run's usage when the Runner asked. The output is normalized as the SDK normalizes it
    (user images and files in replay shape, assistant ids without their reasoning dropped).
    """

    client: Any = None
    """An ``openai.AsyncOpenAI`` (or anything with ``responses.compact``)."""
    model: str = "gpt-4.1"
    """The model ``responses.compact`` runs."""
    mode: CompactionMode = "input"
    """How history is given when the request does not say."""

    async def __call__(self, request: CompactionRequest) -> list[Any]:
        """Call ``responses.compact`` and return its output items, normalized."""
        client = self.client
        if client is None:
            from agents.models._openai_shared import get_default_openai_client
            from openai import AsyncOpenAI

            client = get_default_openai_client() or AsyncOpenAI()
        mode = request.mode or self.mode
        kwargs: dict[str, Any] = {"model": self.model}
        if mode == "previous_response_id":
            if not request.response_id:
                raise StoreUsageError(
                    f"Compacting session {request.session_id!r} by previous_response_id needs "
                    "the newest response id; the request has none.")
            kwargs["previous_response_id"] = request.response_id
        else:
            kwargs["input"] = list(request.items)
        compacted = await client.responses.compact(**kwargs)
        usage = getattr(compacted, "usage", None)
        if request.wrapper is not None and usage is not None:
            from agents.usage import _response_usage_to_usage

            request.wrapper.usage.add(_response_usage_to_usage(usage))
        output = list(getattr(compacted, "output", None) or [])
        items: list[Any] = _strip_orphaned_assistant_ids(
            _normalize_compaction_output_items(output))
        return items


def _text(item: Any) -> str | None:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content or None
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str)) or None
    return None


def summary_content(items: Sequence[dict[str, Any]]) -> Content:
    """The compaction event's native summary: the texts of the summary's messages, one line
    each, or (when none has text, as an encrypted ``compaction`` item) a line naming the
    items' types. The items themselves are kept exactly in their own events."""
    texts = [t for item in items if (t := _text(item)) is not None]
    if not texts:
        kinds = ", ".join(str(item.get("type", "message")) for item in items)
        texts = [f"OpenAI Agents compaction: {len(items)} summary item(s) ({kinds})."]
    return Content(role="user", parts=(Part(text="\n".join(texts)),))


def unanswered_calls(items: Sequence[Any]) -> list[str]:
    """The call ids of the tool calls among ``items`` (``*_call`` items with a ``call_id``)
    that no ``*_call_output`` item among them answers, oldest first: a compaction must not
    summarize a call whose output is still to come (an approval, a tool in flight)."""
    calls: list[str] = []
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        kind, call_id = item.get("type"), item.get("call_id")
        if not isinstance(kind, str) or not isinstance(call_id, str):
            continue
        if kind.endswith("_call_output"):
            answered.add(call_id)
        elif kind.endswith("_call"):
            calls.append(call_id)
    return [c for c in calls if c not in answered]
