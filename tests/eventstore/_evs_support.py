"""Shared helpers for the eventstore tests: event builders, hypothesis strategies, backend URLs.

Plain functions (not fixtures) so that hypothesis state machines and child processes can use them.
The module name is prefixed so it cannot clash with other test packages' helpers on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import strategies as st

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    ArtifactRef,
    Content,
    Event,
    EventActions,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    open_store,
)

T = TypeVar("T")

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
POSTGRES_ENV = "EVS_TEST_POSTGRES_URL"


def backend_module_exists(name: str) -> bool:
    """Return True once the module ``name`` exists (the SQL backends are written separately)."""
    return importlib.util.find_spec(name) is not None


def postgres_base_url() -> str:
    """The PostgreSQL server the tests use (``EVS_TEST_POSTGRES_URL`` or the local default)."""
    return os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)


def run_in_thread(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on a private loop in a worker thread.

    Used by synchronous fixtures and state machines so that they never touch the event loop that
    pytest-asyncio manages for the test.
    """

    async def main() -> T:
        return await factory()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


@dataclass
class BackendTarget:
    """Where a test's data lives: the backend name and the URL of its private database."""

    name: str
    url: str

    @property
    def persistent(self) -> bool:
        """Whether a second store opened on ``url`` sees the first one's data."""
        return self.name != "memory"

    async def open(self, **options: Any) -> EventStore:
        """Open a store on the test's database (schema upgraded for SQL backends)."""
        if self.persistent:
            options.setdefault("auto_upgrade", True)
        return await open_store(self.url, **options)


@dataclass
class StoreFactory:
    """Opens stores on one test database and closes every one of them at teardown."""

    target: BackendTarget
    opened: list[EventStore] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def url(self) -> str:
        return self.target.url

    @property
    def persistent(self) -> bool:
        return self.target.persistent

    async def __call__(self, **options: Any) -> EventStore:
        store = await self.target.open(**options)
        self.opened.append(store)
        return store

    async def aclose(self) -> None:
        for store in self.opened:
            await store.aclose()


# -- event builders ------------------------------------------------------------------------------


def text_event(text: str = "hello", *, author: str = "user", **fields: Any) -> Event:
    """A plain message event."""
    content = Content(role="user" if author == "user" else "model", parts=(Part(text=text),))
    return Event(author=author, content=content, **fields)


def delta_event(delta: dict[str, Any], *, author: str = "agent", **fields: Any) -> Event:
    """An event that only carries a state delta."""
    return Event(author=author, actions=EventActions(state_delta=delta), **fields)


def call_event(call_id: str, name: str = "lookup", args: dict[str, Any] | None = None) -> Event:
    """A model event with one function call."""
    call = FunctionCall(id=call_id, name=name, args=args or {"q": 1})
    return Event(author="agent", content=Content(role="model", parts=(Part(function_call=call),)))


def response_event(call_id: str, name: str = "lookup") -> Event:
    """A tool response event."""
    response = FunctionResponse(id=call_id, name=name, response={"result": "ok"})
    return Event(
        author="agent", content=Content(role="user", parts=(Part(function_response=response),))
    )


async def full_dump(store: EventStore) -> dict[str, Any]:
    """Everything observable about every session of ``store``: for before/after comparisons."""
    dump: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        page = await store.list_sessions(after=cursor, limit=50)
        for info in page.sessions:
            session = await store.get_session(info.id)
            dump[info.id] = (info, session.events, session.state,
                             await store.list_artifacts(info.id))
        if page.next_cursor is None:
            return dump
        cursor = page.next_cursor


# -- hypothesis strategies -----------------------------------------------------------------------

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63) + 1, max_value=(1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
# Lists, not tuples: JSON has no tuples, so a tuple would come back as a list.
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)

state_keys = st.sampled_from(["a", "b", "c", "nested", "user:pref", "app:flag", "temp:scratch"])
session_keys = st.sampled_from(["a", "b", "c", "nested", "d"])
state_values = st.none() | st.integers(-5, 5) | st.text(max_size=4) | st.dictionaries(
    st.sampled_from(["x", "y"]), st.integers(0, 3), max_size=2
)
session_deltas = st.dictionaries(session_keys, state_values, max_size=3)

function_calls = st.builds(FunctionCall, id=ids, name=names, args=json_objects)
confirmation_calls = st.builds(
    FunctionCall, id=ids, name=st.just(REQUEST_CONFIRMATION_FUNCTION), args=json_objects
)
function_responses = st.builds(FunctionResponse, id=ids, name=names, response=json_objects)
confirmation_answers = st.builds(
    FunctionResponse, id=ids, name=st.just(REQUEST_CONFIRMATION_FUNCTION), response=json_objects
)
artifact_refs = st.builds(
    ArtifactRef,
    filename=st.text(min_size=1, max_size=12) | ids.map(lambda s: f"user:{s}"),
    version=st.integers(0, 50),
    mime_type=st.sampled_from(["text/plain", "image/png", "application/octet-stream"]),
)
parts = st.one_of(
    st.builds(Part, text=st.text(max_size=30)),
    st.builds(Part, function_call=function_calls | confirmation_calls),
    st.builds(Part, function_response=function_responses | confirmation_answers),
    st.builds(Part, artifact=artifact_refs),
)
contents = st.builds(
    Content, role=st.sampled_from(["user", "model"]), parts=st.lists(parts, max_size=4).map(tuple)
)
confirmations = st.builds(
    ToolConfirmation, hint=st.text(max_size=10), confirmed=st.booleans(), payload=json_values
)
actions = st.builds(
    EventActions,
    state_delta=st.dictionaries(
        st.sampled_from(["a", "b", "user:u", "app:x", "deep"]), json_values, max_size=3
    ),
    # Keys no delta above sets: an event sets or deletes a key, never both.
    state_deletions=st.lists(st.sampled_from(["gone", "user:gone", "app:gone"]), unique=True,
                             max_size=2).map(tuple),
    artifact_delta=st.dictionaries(st.text(min_size=1, max_size=8), st.integers(0, 9), max_size=2),
    requested_tool_confirmations=st.dictionaries(ids, confirmations, max_size=2),
    skip_summarization=st.booleans(),
    escalate=st.booleans(),
    transfer_to_agent=st.none() | names,
)
events = st.builds(
    Event,
    author=st.just("user") | names,
    id=ids,
    invocation_id=st.text(max_size=10),
    branch=st.none() | st.text(max_size=10),
    timestamp=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    content=st.none() | contents,
    actions=actions,
    long_running_tool_ids=st.lists(ids, max_size=3).map(tuple),
    started_call_ids=st.lists(ids, max_size=2).map(tuple),
    partial=st.just(False),
    turn_complete=st.booleans(),
    error_code=st.none() | st.text(max_size=8),
    error_message=st.none() | st.text(max_size=20),
    custom_metadata=json_objects,
)


def unique_id(prefix: str = "s") -> str:
    """A fresh id for a session or an event."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


REPO = Path(__file__).resolve().parents[2]
"""The project's root (children import ``eventstore`` from here)."""


async def kill_after_ready(args: list[str], delay: float, *, expect_killed: bool = True) -> str:
    """Run ``python *args`` (a child script that prints ``ready`` once it starts working), let it
    work ``delay`` seconds after that line, SIGKILL it, and return what it printed after
    ``ready``. ``expect_killed``: the child must still have been running when killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, env=env,
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"ready", line
        await asyncio.sleep(delay)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
    out = await process.stdout.read()
    await process.wait()
    if expect_killed:
        assert process.returncode == -signal.SIGKILL
    return out.decode()
