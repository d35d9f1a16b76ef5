"""The append path's fast encoder accepts only what ``check_event`` accepts, with its bytes.

``encode_plain`` returns a payload only when it can prove, without walking the values in
Python, that ``check_event`` would accept the event; the bytes must be ``encode_compact``'s.
Anything it declines goes through the walk, so every refusal keeps its message.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import uuid
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eventstore import (
    MAX_JSON_DEPTH,
    ArtifactRef,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    InvalidEventError,
    Part,
    ToolConfirmation,
    open_store,
)
from eventstore._codec import check_event
from eventstore._encode_fast import encode_plain
from eventstore._stored import encode_compact

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow


class _Colour(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Text(str):
    pass


@dataclasses.dataclass
class _Point:
    x: int


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_ODD_SCALARS = st.sampled_from([
    math.nan, math.inf, -math.inf, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, -(2**63),
    -(2**63) - 1, 2**64 - 1, 2**64, (1, 2), (), {1, 2}, frozenset(), b"x", _Colour.RED,
    _Level.HIGH, _Text("t"), _Point(1), datetime.datetime(2026, 1, 1), uuid.UUID(int=7),
    OrderedDict(a=1), object(), "\ud800", -0.0, 1e308, True,
    _nested(MAX_JSON_DEPTH - 3), _nested(MAX_JSON_DEPTH), _nested(MAX_JSON_DEPTH + 1),
])
_KEYS = st.one_of(st.text(max_size=4), st.sampled_from([1, None, _Text("k"), ("t",)]))
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), _ODD_SCALARS),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)
_JSON_DICTS = st.dictionaries(_KEYS, _VALUES, max_size=4)


@st.composite
def _events(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(["call", "response", "text", "artifact", "none"]))
    part: Part | None = {
        "call": lambda: Part(function_call=FunctionCall(
            id=draw(st.sampled_from(["c1", 5])), name="f", args=draw(_JSON_DICTS))),
        "response": lambda: Part(function_response=FunctionResponse(
            id="c1", name="f", response=draw(_JSON_DICTS))),
        "text": lambda: Part(text=draw(st.sampled_from(["hi", _Text("hi"), "{[" * 150]))),
        "artifact": lambda: Part(artifact=ArtifactRef(
            filename="a.txt", version=draw(st.sampled_from([1, True])))),
        "none": lambda: None,
    }[kind]()
    confirmations = draw(st.dictionaries(
        st.sampled_from(["c1", "c2"]),
        st.builds(ToolConfirmation, hint=st.sampled_from(["", "ok", 3]),
                  confirmed=st.sampled_from([False, True, 1]), payload=_VALUES),
        max_size=2))
    return Event(
        author="agent",
        invocation_id="inv",
        timestamp=draw(st.sampled_from([1.5, 2, math.nan, True])),
        content=None if part is None else Content(role="model", parts=(part,)),
        actions=EventActions(
            state_delta=draw(st.dictionaries(_KEYS, _VALUES, max_size=3)),
            artifact_delta=draw(st.dictionaries(st.sampled_from(["a", 1]),
                                                st.sampled_from([1, True, 1.0]), max_size=2)),
            requested_tool_confirmations=confirmations,
            transfer_to_agent=draw(st.sampled_from([None, "other", 4])),
        ),
        long_running_tool_ids=draw(st.sampled_from([(), ("c1",), ("c1", 2), ["c1"]])),
        turn_complete=draw(st.sampled_from([False, True, 0])),
        custom_metadata=draw(_JSON_DICTS),
    )


def _accepted(event: Event) -> bool:
    try:
        check_event(event)
        encode_compact(event)
    except (InvalidEventError, TypeError):
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(_events())
def test_fast_encoder_accepts_only_what_the_walk_accepts_with_the_same_bytes(
    event: Event,
) -> None:
    payload = encode_plain(event)
    if payload is not None:
        assert _accepted(event)
        assert payload == encode_compact(event)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53) + 1, 2**53 - 1),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20)))
def test_fast_encoder_takes_every_plain_event(args: dict[str, Any]) -> None:
    # The fast path is the point: plain JSON of every kind must not fall back to the walk
    # (but for payloads with MAX_JSON_DEPTH brackets or more, which may nest too deep).
    event = Event(author="agent", content=Content(role="model", parts=(
        Part(function_call=FunctionCall(id="c", name="f", args=args)),)),
        actions=EventActions(state_delta={"k": args}), custom_metadata={"m": args})
    payload = encode_compact(event)
    assume(payload.count(b"[") + payload.count(b"{") < MAX_JSON_DEPTH)
    assert encode_plain(event) == payload


@pytest.mark.parametrize("value", [
    pytest.param(math.nan, id="nan"), pytest.param(-math.inf, id="-inf"),
    pytest.param(2**63, id="int64-max+1"), pytest.param(2**64 - 1, id="uint64-max"),
    pytest.param((1,), id="tuple"), pytest.param(_Colour.RED, id="enum"),
    pytest.param(uuid.UUID(int=1), id="uuid"), pytest.param(_nested(MAX_JSON_DEPTH), id="deep"),
    pytest.param(datetime.date(2026, 1, 1), id="date"), pytest.param(_Point(1), id="dataclass"),
])
def test_fast_encoder_declines_what_orjson_would_write_but_the_log_refuses(value: Any) -> None:
    event = Event(author="agent", custom_metadata={"v": [value]})
    assert encode_plain(event) is None


@pytest.mark.parametrize(("value", "words"), [
    pytest.param(math.nan, "custom_metadata['v'] is nan", id="nan"),
    pytest.param(2**64 - 1, "custom_metadata['v'] is the integer 18446744073709551615",
                 id="uint64-max"),
    pytest.param((1, 2), "custom_metadata['v'] is a tuple", id="tuple"),
    pytest.param(_nested(MAX_JSON_DEPTH), "is nested deeper than", id="deep"),
])
async def test_append_still_names_the_refused_value(tmp_path: Any, value: Any, words: str) -> None:
    async with await open_store(tmp_path / "s.db", auto_upgrade=True) as store:
        session = await store.create_session(app_name="a", user_id="u")
        with pytest.raises(InvalidEventError) as raised:
            await store.append(session.id, Event(author="agent", custom_metadata={"v": value}),
                               expected_version=0)
        assert words in str(raised.value)
        assert await store.read(session.id) == []
