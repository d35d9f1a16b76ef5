"""What ``EventStoreSession`` keeps of the SDK's items: the item a stored event carries
(``custom_metadata["openai_agents"]``), the items at head kept in memory (``HeadCache``), the
JSON check of items given to ``add_items``, and their native mirror (text, calls, outputs).
The session itself lives in ``openai_agents``, whose docstring says what each event means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic_core import to_jsonable_python

from eventstore import Content, FunctionCall, FunctionResponse, Part, StoreUsageError

__all__ = [
    "CACHE_NAME", "METADATA_KEY", "HeadCache", "SessionItemError", "call_id_of",
    "mirrored_call_id", "native_mirror", "plain_item",
]

METADATA_KEY = "openai_agents"
"""Key in ``Event.custom_metadata`` of what an event means to the session (see the module)."""

_NONE: dict[str, Any] = {}
CACHE_NAME = "openai_agents.items.v1"
"""Name of the store cache (``EventStore.save_cache``) of a session's items at head."""


class HeadCache:
    """The items at head of one session at ``version`` (by seq, oldest first; parsed from the
    log and never handed out: callers get copies), and the id of the event at ``version``:
    rebuildable at any time from the log. Loaded from the store's cache (``from_bytes``), the
    items are parsed once and that parse is handed to the first full read (nobody else holds
    it); the by-seq mapping is built only when a change needs it."""

    __slots__ = ("_blob", "_fresh", "_items", "_seqs", "event_id", "version")

    def __init__(self, items: dict[int, Any] | None, version: int, event_id: str, *,
                 seqs: list[int] | None = None, blob: bytes | None = None,
                 fresh: list[Any] | None = None) -> None:
        self._items = items
        self._fresh = fresh
        self._seqs = seqs
        self._blob = blob
        self.version = version
        self.event_id = event_id

    @property
    def items(self) -> dict[int, Any]:
        """The items by seq, parsed on first use."""
        if self._items is None:
            assert self._seqs is not None
            assert self._blob is not None
            parsed = orjson.loads(self._blob) if self._fresh is None else self._fresh
            self._items = dict(zip(self._seqs, parsed, strict=True))
            self._seqs = None
            self._fresh = None
        return self._items

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one newer event (``read_mappings(compact=True)``) onto the cache."""
        self.version = event["seq"]
        self.event_id = event["id"]
        meaning = event.get("m", _NONE).get(METADATA_KEY)
        if not isinstance(meaning, dict):
            return
        items = self.items
        self._blob = None
        if meaning.get("clear") is True or "compaction" in meaning:
            self._items = {}  # a compaction's summary items follow it as item events
        elif "pop" in meaning:
            items.pop(meaning["pop"], None)
        elif "item" in meaning:
            items[event["seq"]] = meaning["item"]  # parsed for this read: ours alone

    def _items_blob(self) -> bytes:
        if self._blob is None:
            self._blob = orjson.dumps(list(self.items.values()))
        return self._blob

    def decoded(self, limit: int | None) -> list[Any]:
        """Fresh copies of the newest ``limit`` items (all when None), oldest first: one JSON
        array written (kept until the items change) and parsed, so callers may change what
        they get."""
        if limit is not None:
            blob = orjson.dumps(list(self.items.values())[-limit:])
        elif self._fresh is not None:
            fresh, self._fresh = self._fresh, None
            return fresh
        else:
            blob = self._items_blob()
        items: list[Any] = orjson.loads(blob)
        return items

    def to_bytes(self) -> bytes:
        """The cache as kept in the store (``EventStore.save_cache``): a JSON header
        ``[event_id, [seq, ...]]``, a newline, the items' JSON array."""
        seqs = self._seqs if self._items is None else list(self._items)
        return orjson.dumps([self.event_id, seqs]) + b"\n" + self._items_blob()

    @classmethod
    def from_bytes(cls, version: int, data: bytes) -> HeadCache | None:
        """The cache ``to_bytes`` wrote at ``version``, or None when ``data`` is not one."""
        header, sep, blob = data.partition(b"\n")
        try:
            event_id, seqs = orjson.loads(header)
            items = orjson.loads(blob)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return None
        if (not sep or not isinstance(event_id, str) or not isinstance(seqs, list)
                or not isinstance(items, list) or len(items) != len(seqs)
                or not all(type(s) is int for s in seqs)):
            return None
        return cls(None, version, event_id, seqs=seqs, blob=blob, fresh=items)


class SessionItemError(StoreUsageError, TypeError):
    """Items given to ``add_items`` that cannot be stored as given: not a list of mappings, or
    holding a value JSON has no exact form for (an object, a set, bytes, a non-finite float, a
    non-string key). A TypeError, as the SDK's own sessions raise for them, and a
    StoreUsageError; nothing was stored. ``index`` is the offending item's position, ``path``
    where in it the value sits (``"$.content[0]"``), when known."""

    def __init__(self, message: str, *, index: int | None = None,
                 path: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.path = path


_SCALARS = (str, int, bool, type(None))
_DEEP = 200
"""Below this depth the walk stops; the event codec refuses deeper values (InvalidEventError)."""


def _json_value(value: Any, index: int, path: str, depth: int = 0) -> Any:
    """``value`` as JSON gives it back: itself, or a copy with tuples as lists (as
    SQLiteSession's ``json.dumps`` stores them). Refuses what JSON has no exact form for
    (``json.dumps`` refuses most of it; NaN and the infinities would come back as ``null``)."""
    if isinstance(value, _SCALARS) or depth > _DEEP:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SessionItemError(
                f"Session item {index} holds {value!r} at {path}, which JSON cannot keep.",
                index=index, path=path)
        return value
    if isinstance(value, dict):
        copy: dict[str, Any] | None = None
        for key, inner in value.items():
            if not isinstance(key, str):
                raise SessionItemError(
                    f"Session item {index} has the key {key!r} ({type(key).__name__}) at "
                    f"{path}; JSON object keys are strings.", index=index, path=path)
            plain = _json_value(inner, index, f"{path}.{key}", depth + 1)
            if plain is not inner:
                copy = dict(value) if copy is None else copy
                copy[key] = plain
        return value if copy is None else copy
    if isinstance(value, (list, tuple)):
        items = [_json_value(inner, index, f"{path}[{i}]", depth + 1)
                 for i, inner in enumerate(value)]
        if isinstance(value, list) and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items
    raise SessionItemError(
        f"Session item {index} holds a {type(value).__name__} at {path}, which is not "
        f"JSON-serializable ({value!r:.80}).", index=index, path=path)


def _is_plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON as it is: exact dicts with string keys, lists, strings, ints,
    bools, None and finite floats (what items hold). The check ``_json_value`` makes without
    the paths it builds for its messages: a value that fails it goes there."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None or depth > _DEEP:
        return True
    if kind is dict:
        for key, inner in value.items():  # loops, not all(): this runs on every add_items
            if type(key) is not str or not _is_plain(inner, depth + 1):
                return False
        return True
    if kind is list:
        return all(_is_plain(inner, depth + 1) for inner in value)
    return kind is float and math.isfinite(value)


def plain_item(item: Any, index: int) -> dict[str, Any]:
    """The item as the JSON mapping that is stored (a pydantic model is dumped first)."""
    if not isinstance(item, Mapping) and hasattr(item, "model_dump"):
        try:
            item = to_jsonable_python(item)
        except ValueError as exc:  # PydanticSerializationError
            raise SessionItemError(f"Session item {index} cannot be serialized: {exc}",
                                   index=index) from exc
    if not isinstance(item, Mapping):
        raise SessionItemError(
            f"Session items must be mappings (input items); item {index} is a "
            f"{type(item).__name__}: {item!r:.80}.", index=index)
    if type(item) is dict and _is_plain(item):
        return dict(item)
    plain: dict[str, Any] = _json_value(dict(item), index, "$")
    return plain


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


def call_id_of(item: dict[str, Any], kind: str) -> str | None:
    """The SDK's call id of a ``function_call`` / ``function_call_output`` item of ``kind``."""
    call_id = item.get("call_id")
    return call_id if item.get("type") == kind and isinstance(call_id, str) else None


def mirrored_call_id(call_id: str, event_id: str) -> str:
    """The id under which the function call item of event ``event_id`` is mirrored.

    The SDK's call ids may repeat within a session (a server that numbers each response's calls
    ``call_0`` …, a session used again after ``clear_session``), and every reader of the log
    pairs by call id, so the mirror adds the event's id (one item per event: unique in the
    session by construction). The item itself keeps the SDK's id exactly.
    """
    return f"{call_id}@{event_id}"


def native_mirror(item: dict[str, Any], event_id: str,
            answers: str | None = None) -> tuple[str, Content | None]:
    """``(author, content)`` mirroring an item natively where the event model can; an output
    mirrors as the response to the call mirrored as ``answers``."""
    kind = item.get("type")
    role = item.get("role")
    call_id = call_id_of(item, "function_call")
    if call_id is not None:
        raw = item.get("arguments")
        try:
            args = orjson.loads(raw) if isinstance(raw, str) else None
        except orjson.JSONDecodeError:
            args = None
        call = FunctionCall(id=mirrored_call_id(call_id, event_id),
                            name=str(item.get("name", "")),
                            args=args if isinstance(args, dict) else {"arguments": raw})
        return "assistant", Content(role="model", parts=(Part(function_call=call),))
    call_id = call_id_of(item, "function_call_output")
    if call_id is not None:
        output = FunctionResponse(id=answers or call_id, name=str(item.get("name", "")),
                                  response={"output": item.get("output")})
        return "user", Content(role="user", parts=(Part(function_response=output),))
    if role in ("user", "system", "developer", "assistant") and (kind in (None, "message")):
        text = _text_of(item.get("content"))
        model = role == "assistant"
        content = None if text is None else Content(
            role="model" if model else "user", parts=(Part(text=text),)
        )
        return ("assistant" if model else "user"), content
    return "assistant", None
