"""The append path's encoder: an event's stored payload, checked without walking its values.

``check_event`` walks every value of an event in Python, building a path for each (to name
it in an error), which costs several times what encoding does. Nearly every event an append
sees is plain: fields of their exact declared types, JSON values of the builtin types only.
For those, ``encode_plain`` proves what the walk would prove from the encoded bytes instead,
in C:

- every field is checked by exact type (``type(x) is str``), which implies the walk's
  ``isinstance`` checks; anything else (a subclass, a wrong type) is left to the walk;
- the payload tree (``compact_tree``) is serialized by orjson with the passthrough options,
  so a subclass of a builtin, a dataclass or a datetime fails it (``TypeError``) instead of
  being converted; so does a non-string key;
- the bytes are parsed back and compared with the tree: equal only when every value was
  already its own JSON form. A NaN or ±Inf (written as ``null``), a tuple (written as a list),
  a UUID or an Enum member (written as their values) make it unequal;
- what a round trip cannot see is bounded otherwise: ``OPT_STRICT_INTEGER`` refuses ints
  beyond ±(2**53 - 1) (plain orjson writes uint64 values), fewer than ``MAX_JSON_DEPTH`` opening
  brackets in all means no value nests that deep, and at most ``MAX_STATE_VALUE_BYTES`` in
  all means no state value is larger.

Any doubt returns None and the caller runs ``check_event`` and ``encode_compact``, which raise
the error naming the value, exactly as before; a None is never an error by itself.
"""

from __future__ import annotations

import math
from typing import Final

import orjson

from ._codec import MAX_JSON_DEPTH, MAX_STATE_VALUE_BYTES
from ._events import (
    ArtifactRef,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)
from ._stored import compact_tree

__all__ = ["encode_plain"]

_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    # Refuses ints beyond ±(2**53 - 1), so none outside the signed 64-bit range gets through (plain
    # orjson writes uint64 values); the rare larger int takes the slow path.
    | orjson.OPT_STRICT_INTEGER
)
_ROLES: Final = ("user", "model")


def _plain_part(part: object) -> bool:
    if type(part) is not Part:
        return False
    if part.text is not None:
        return type(part.text) is str
    call = part.function_call
    if call is not None:
        return (type(call) is FunctionCall and type(call.id) is str
                and type(call.name) is str and type(call.args) is dict)
    response = part.function_response
    if response is not None:
        return (type(response) is FunctionResponse and type(response.id) is str
                and type(response.name) is str and type(response.response) is dict)
    ref = part.artifact
    return (type(ref) is ArtifactRef and type(ref.filename) is str
            and type(ref.mime_type) is str and type(ref.version) is int)


def _plain_actions(actions: EventActions) -> bool:
    # Keys need no check here: orjson refuses a non-string key. An empty state key would
    # pass it, so it is looked for.
    delta, artifacts = actions.state_delta, actions.artifact_delta
    confirmations = actions.requested_tool_confirmations
    if type(delta) is not dict or "" in delta or type(artifacts) is not dict \
            or type(confirmations) is not dict or actions.state_deletions != () \
            or actions.compaction is not None:
        return False  # deletions and compactions are rare: check_event's walk checks them
    if artifacts and not all(type(v) is int for v in artifacts.values()):
        return False
    if confirmations and not all(
        type(c) is ToolConfirmation and type(c.hint) is str and type(c.confirmed) is bool
        for c in confirmations.values()
    ):
        return False
    transfer = actions.transfer_to_agent
    return (type(actions.skip_summarization) is bool and type(actions.escalate) is bool
            and (transfer is None or type(transfer) is str))


def _plain_fields(event: Event) -> bool:
    """Every field of ``event`` has exactly its declared type (``check_event``'s checks but
    the JSON values', which the round trip covers)."""
    timestamp, content, actions = event.timestamp, event.content, event.actions
    lro, started = event.long_running_tool_ids, event.started_call_ids
    branch, code, message = event.branch, event.error_code, event.error_message
    return (
        type(event.id) is str and event.id != "" and type(event.author) is str
        and event.author != "" and event.partial is False
        and type(event.invocation_id) is str and (branch is None or type(branch) is str)
        and ((type(timestamp) is float and math.isfinite(timestamp)) or type(timestamp) is int)
        and (content is None or (
            type(content) is Content and content.role in _ROLES
            and type(content.parts) is tuple and all(_plain_part(p) for p in content.parts)))
        and type(actions) is EventActions and _plain_actions(actions)
        and type(lro) is tuple and (not lro or all(type(i) is str for i in lro))
        and type(started) is tuple and (not started or all(type(i) is str for i in started))
        and type(event.turn_complete) is bool
        and (code is None or type(code) is str) and (message is None or type(message) is str)
        and type(event.custom_metadata) is dict
    )


def encode_plain(event: object) -> bytes | None:
    """Return the stored payload of ``event`` (``encode_compact``'s bytes) when it is plain
    and ``check_event`` would accept it; None when it is not plain or might be refused (see
    the module docstring) — then the caller checks and encodes it the slow way."""
    if type(event) is not Event or not _plain_fields(event):
        return None
    tree = compact_tree(event)
    try:
        payload = orjson.dumps(tree, option=_OPTIONS)
    except TypeError:
        return None
    size = len(payload)
    if (
        size > MAX_STATE_VALUE_BYTES
        # MAX_JSON_DEPTH nested containers take twice as many bytes at least
        or (size >= 2 * MAX_JSON_DEPTH
            and payload.count(b"[") + payload.count(b"{") >= MAX_JSON_DEPTH)
        or orjson.loads(payload) != tree
    ):
        return None
    return payload
