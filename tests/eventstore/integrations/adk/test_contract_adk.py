"""ADK's session and artifact service promises, restated as tests of our services, on memory,
SQLite and PostgreSQL: the four abstract methods, GetSessionConfig filters, state scopes,
staleness, ordering, deletion, artifacts (versions, metadata, user scope, delete)."""

from __future__ import annotations

from typing import Any

from _extras import require_extra

adk = require_extra("google.adk", "adk")

import pytest  # noqa: E402
from google.adk.errors import StaleSessionError  # noqa: E402
from google.adk.errors.already_exists_error import AlreadyExistsError  # noqa: E402
from google.adk.errors.session_not_found_error import SessionNotFoundError  # noqa: E402
from google.adk.events import Event, EventActions  # noqa: E402
from google.adk.sessions import BaseSessionService  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.adk import (  # noqa: E402
    EventStoreArtifactService,
    EventStoreSessionService,
)

APP = "app"


@pytest.fixture
def service(store: EventStore) -> EventStoreSessionService:
    return EventStoreSessionService(store)


@pytest.fixture
def artifacts(store: EventStore) -> EventStoreArtifactService:
    return EventStoreArtifactService(store)


def _text(author: str, text: str, *, ts: float | None = None, **actions: object) -> Event:
    extra = {} if ts is None else {"timestamp": ts}
    return Event(
        invocation_id="inv",
        author=author,
        content=types.Content(role="user" if author == "user" else "model",
                              parts=[types.Part(text=text)]),
        actions=EventActions(**actions),  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


async def test_service_is_an_adk_session_service(service: EventStoreSessionService) -> None:
    assert isinstance(service, BaseSessionService)


async def test_create_get_with_given_and_generated_ids(service: EventStoreSessionService) -> None:
    made = await service.create_session(app_name=APP, user_id="u", session_id="s1")
    assert (made.id, made.app_name, made.user_id, made.state, made.events) == (
        "s1", APP, "u", {}, []
    )
    generated = await service.create_session(app_name=APP, user_id="u")
    assert generated.id
    assert generated.id != "s1"
    got = await service.get_session(app_name=APP, user_id="u", session_id="s1")
    assert got is not None
    assert (got.id, got.state, got.events) == ("s1", {}, [])
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id="s1")
    assert await service.get_session(app_name=APP, user_id="u", session_id="nope") is None
    assert await service.get_session(app_name=APP, user_id="other", session_id="s1") is None
    assert await service.get_session(app_name="other", user_id="u", session_id="s1") is None


async def test_create_state_scopes_and_user_state(service: EventStoreSessionService) -> None:
    made = await service.create_session(
        app_name=APP, user_id="u", session_id="s",
        state={"k": 1, "user:name": "Ada", "app:plan": "pro", "temp:scratch": 9},
    )
    assert made.state == {"k": 1, "user:name": "Ada", "app:plan": "pro"}
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == made.state
    assert got.events == []  # the state given at creation is no event to ADK
    other = await service.create_session(app_name=APP, user_id="u", session_id="s2")
    assert other.state == {"user:name": "Ada", "app:plan": "pro"}
    stranger = await service.create_session(app_name=APP, user_id="v", session_id="s3")
    assert stranger.state == {"app:plan": "pro"}
    assert await service.get_user_state(app_name=APP, user_id="u") == {"name": "Ada"}
    assert await service.get_user_state(app_name=APP, user_id="v") == {}


async def test_append_event_applies_and_persists_state(service: EventStoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    event = _text("agent", "hi", state_delta={"a": 1, "temp:t": 2, "user:u": 3, "app:x": 4})
    returned = await service.append_event(session, event)
    assert returned.actions.state_delta == {"a": 1, "user:u": 3, "app:x": 4}
    assert session.state == {"a": 1, "temp:t": 2, "user:u": 3, "app:x": 4}
    assert session.events == [returned]
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == {"a": 1, "user:u": 3, "app:x": 4}
    assert got.events == [returned]
    assert got.last_update_time == event.timestamp
    sibling = await service.create_session(app_name=APP, user_id="u", session_id="s2")
    assert sibling.state == {"user:u": 3, "app:x": 4}


async def test_partial_events_are_not_stored(service: EventStoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    partial = _text("agent", "stream")
    partial.partial = True
    assert await service.append_event(session, partial) is partial
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.events == []


async def test_stale_session_raises_and_writes_nothing(
    service: EventStoreSessionService, store: EventStore
) -> None:
    await service.create_session(app_name=APP, user_id="u", session_id="s")
    first = await service.get_session(app_name=APP, user_id="u", session_id="s")
    second = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert first is not None
    assert second is not None
    await service.append_event(first, _text("user", "one"))
    with pytest.raises(StaleSessionError):
        await service.append_event(second, _text("user", "two", state_delta={"x": 1}))
    assert await store.version("s") == 1
    assert (await store.state("s")) == {}
    # The fresh object keeps working; a reloaded one too.
    await service.append_event(first, _text("user", "three"))
    reloaded = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert reloaded is not None
    await service.append_event(reloaded, _text("user", "four"))
    assert await store.version("s") == 3


async def test_append_to_a_deleted_session_raises(service: EventStoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, _text("user", "late"))


async def test_get_session_config_filters(service: EventStoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for i in range(5):
        await service.append_event(session, _text("user", f"m{i}", ts=1000.0 + i))

    async def texts(config: GetSessionConfig | None) -> list[str]:
        got = await service.get_session(app_name=APP, user_id="u", session_id="s", config=config)
        assert got is not None
        return [e.content.parts[0].text or "" for e in got.events if e.content and e.content.parts]

    assert await texts(None) == ["m0", "m1", "m2", "m3", "m4"]
    assert await texts(GetSessionConfig(num_recent_events=2)) == ["m3", "m4"]
    assert await texts(GetSessionConfig(num_recent_events=0)) == []
    assert await texts(GetSessionConfig(num_recent_events=10)) == ["m0", "m1", "m2", "m3", "m4"]
    assert await texts(GetSessionConfig(after_timestamp=1002.0)) == ["m2", "m3", "m4"]
    assert await texts(GetSessionConfig(after_timestamp=1001.5, num_recent_events=1)) == ["m4"]
    assert await texts(GetSessionConfig(after_timestamp=5000.0)) == []


async def test_list_sessions_by_last_update_with_state(service: EventStoreSessionService) -> None:
    a = await service.create_session(app_name=APP, user_id="u", session_id="a",
                                     state={"k": "a"})
    b = await service.create_session(app_name=APP, user_id="v", session_id="b")
    c = await service.create_session(app_name=APP, user_id="u", session_id="c")
    await service.append_event(a, _text("user", "later", state_delta={"user:z": 1}))
    listed = await service.list_sessions(app_name=APP)
    assert [s.id for s in listed.sessions] == ["b", "c", "a"]
    assert [s.events for s in listed.sessions] == [[], [], []]
    assert {s.id: s.state for s in listed.sessions} == {
        "a": {"k": "a", "user:z": 1}, "b": {}, "c": {"user:z": 1}
    }
    assert [s.last_update_time for s in listed.sessions] == sorted(
        s.last_update_time for s in listed.sessions
    )
    mine = await service.list_sessions(app_name=APP, user_id="u")
    assert [s.id for s in mine.sessions] == ["c", "a"]
    assert (await service.list_sessions(app_name="none")).sessions == []
    assert b.id == "b"
    assert c.id == "c"


async def test_delete_session_only_its_own(service: EventStoreSessionService) -> None:
    await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="other", session_id="s")
    assert await service.get_session(app_name=APP, user_id="u", session_id="s") is not None
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    assert await service.get_session(app_name=APP, user_id="u", session_id="s") is None
    await service.delete_session(app_name=APP, user_id="u", session_id="s")  # no error


async def test_none_state_values_stay_in_the_state_after_a_reload(
    service: EventStoreSessionService, store: EventStore
) -> None:
    """ADK's rule: a key set to None is still a key, in the session's, the user's and the
    app's scope, read back by get_session, list_sessions and get_user_state."""
    session = await service.create_session(
        app_name=APP, user_id="u", session_id="s",
        state={"k": 1, "keep": 2, "user:pref": "dark", "app:motd": "hi"})
    event = await service.append_event(session, _text(
        "agent", "x", state_delta={"k": None, "user:pref": None, "app:motd": None}))
    assert "k" in session.state
    assert session.state["k"] is None
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.events[-1].actions.state_delta == {"k": None, "user:pref": None,
                                                  "app:motd": None}
    assert got.events[-1] == event
    assert got.state == {"k": None, "keep": 2, "user:pref": None, "app:motd": None}
    [listed] = (await service.list_sessions(app_name=APP, user_id="u")).sessions
    assert listed.state == got.state
    assert await service.get_user_state(app_name=APP, user_id="u") == {"pref": None}
    other = await service.create_session(app_name=APP, user_id="u", session_id="t")
    assert other.state == {"user:pref": None, "app:motd": None}
    assert await store.state("s") == got.state


async def test_events_round_trip_through_the_service(service: EventStoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    call = types.Part(function_call=types.FunctionCall(id="c1", name="f", args={"q": [1, 2]}),
                      thought_signature=b"\x01sig")
    model = Event(
        invocation_id="i", author="agent", branch="root.agent",
        content=types.Content(role="model", parts=[
            types.Part(text="thinking", thought=True), call,
            types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
        ]),
        long_running_tool_ids={"c1"},
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=7),
        actions=EventActions(artifact_delta={"f.txt": 0}, skip_summarization=True),
    )
    response = Event(
        invocation_id="i", author="agent",
        content=types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(id="c1", name="f", response={"ok": True})
        )]),
    )
    stored = [await service.append_event(session, e) for e in (model, response)]
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.events == stored
    assert [e.model_dump_json() for e in got.events] == [e.model_dump_json() for e in stored]


# -- artifacts -------------------------------------------------------------------------------------


async def test_artifact_versions_load_and_metadata(artifacts: EventStoreArtifactService) -> None:
    scope: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
    png = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))
    text = types.Part(text="hello")
    assert await artifacts.save_artifact(filename="a", artifact=png,
                                         custom_metadata={"w": 2}, **scope) == 0
    assert await artifacts.save_artifact(filename="a", artifact=text, **scope) == 1
    assert await artifacts.load_artifact(filename="a", **scope) == text
    assert await artifacts.load_artifact(filename="a", version=0, **scope) == png
    assert await artifacts.load_artifact(filename="a", version=7, **scope) is None
    assert await artifacts.load_artifact(filename="missing", **scope) is None
    assert await artifacts.list_versions(filename="a", **scope) == [0, 1]
    versions = await artifacts.list_artifact_versions(filename="a", **scope)
    assert [(v.version, v.mime_type, v.custom_metadata) for v in versions] == [
        (0, "image/png", {"w": 2}), (1, "text/plain", {})
    ]
    assert all(v.canonical_uri.endswith(f"/versions/{v.version}") for v in versions)
    one = await artifacts.get_artifact_version(filename="a", version=0, **scope)
    assert one is not None
    assert one.custom_metadata == {"w": 2}
    latest = await artifacts.get_artifact_version(filename="a", **scope)
    assert latest is not None
    assert latest.version == 1
    assert await artifacts.get_artifact_version(filename="a", version=9, **scope) is None
    assert await artifacts.get_artifact_version(filename="zz", **scope) is None


async def test_artifact_other_parts_round_trip(artifacts: EventStoreArtifactService) -> None:
    scope: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
    file_part = types.Part(file_data=types.FileData(file_uri="gs://b/f.pdf",
                                                    mime_type="application/pdf"))
    named = types.Part(inline_data=types.Blob(mime_type="text/csv", data=b"a,b",
                                              display_name="t.csv"))
    await artifacts.save_artifact(filename="f", artifact=file_part, **scope)
    await artifacts.save_artifact(filename="n", artifact=named, **scope)
    await artifacts.save_artifact(filename="d", artifact={"text": "from a dict"}, **scope)
    assert await artifacts.load_artifact(filename="f", **scope) == file_part
    assert await artifacts.load_artifact(filename="n", **scope) == named
    assert await artifacts.load_artifact(filename="d", **scope) == types.Part(text="from a dict")


async def test_artifact_scopes_keys_and_delete(artifacts: EventStoreArtifactService) -> None:
    blob = types.Part(inline_data=types.Blob(mime_type="text/plain", data=b"x"))
    await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s1", filename="mine",
                                  artifact=blob)
    await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s1",
                                  filename="user:shared", artifact=blob)
    await artifacts.save_artifact(app_name=APP, user_id="u", filename="profile", artifact=blob)
    assert await artifacts.list_artifact_keys(app_name=APP, user_id="u", session_id="s1") == [
        "mine", "profile", "user:shared"
    ]
    assert await artifacts.list_artifact_keys(app_name=APP, user_id="u", session_id="s2") == [
        "profile", "user:shared"
    ]
    assert await artifacts.list_artifact_keys(app_name=APP, user_id="u") == [
        "profile", "user:shared"
    ]
    assert await artifacts.list_artifact_keys(app_name=APP, user_id="v") == []
    assert await artifacts.load_artifact(app_name=APP, user_id="u", session_id="s2",
                                         filename="user:shared") == blob
    assert await artifacts.load_artifact(app_name=APP, user_id="u", filename="profile") == blob
    await artifacts.delete_artifact(app_name=APP, user_id="u", session_id="s1", filename="mine")
    await artifacts.delete_artifact(app_name=APP, user_id="u", session_id="s1", filename="mine")
    assert await artifacts.load_artifact(app_name=APP, user_id="u", session_id="s1",
                                         filename="mine") is None
    assert await artifacts.list_versions(app_name=APP, user_id="u", session_id="s1",
                                         filename="mine") == []
    assert await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s1",
                                         filename="mine", artifact=blob) == 0


async def test_artifact_references_are_followed(artifacts: EventStoreArtifactService) -> None:
    blob = types.Part(inline_data=types.Blob(mime_type="text/plain", data=b"target"))
    await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s", filename="t",
                                  artifact=blob)
    ref = types.Part(file_data=types.FileData(
        file_uri=f"artifact://apps/{APP}/users/u/sessions/s/artifacts/t/versions/0",
        mime_type="text/plain",
    ))
    await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s", filename="r",
                                  artifact=ref)
    assert await artifacts.load_artifact(app_name=APP, user_id="u", session_id="s",
                                         filename="r") == blob


async def test_artifact_rewound_away_loads_as_absent(
    service: EventStoreSessionService, artifacts: EventStoreArtifactService
) -> None:
    # ADK's rewind cannot delete a version, so it saves its own marker part over an artifact
    # that did not exist at the rewind point; every ADK service then loads that artifact as absent.
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner

    runner = Runner(app_name=APP, agent=LlmAgent(name="agent", model="gemini-2.0-flash"),
                    session_service=service, artifact_service=artifacts)
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    scope: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
    first, second = types.Part(text="first"), types.Part(text="second")
    await artifacts.save_artifact(filename="kept.txt", artifact=first, **scope)
    await service.append_event(session, Event(invocation_id="inv1", author="agent",
                                              actions=EventActions(artifact_delta={"kept.txt": 0})))
    await artifacts.save_artifact(filename="kept.txt", artifact=second, **scope)
    await artifacts.save_artifact(filename="late.txt", artifact=second, **scope)
    await service.append_event(session, Event(
        invocation_id="inv2", author="agent",
        actions=EventActions(artifact_delta={"kept.txt": 1, "late.txt": 0}),
    ))

    await runner.rewind_async(user_id="u", session_id="s", rewind_before_invocation_id="inv2")

    assert await artifacts.load_artifact(filename="late.txt", **scope) is None
    assert await artifacts.load_artifact(filename="kept.txt", **scope) == first
    assert await artifacts.list_versions(filename="late.txt", **scope) == [0, 1]
    assert await artifacts.load_artifact(filename="late.txt", version=0, **scope) == second


@pytest.mark.parametrize(("app_name", "user_id", "words"), [
    ("other", "u", "same app and user scope"),
    (APP, "v", "same app and user scope"),
])
async def test_artifact_reference_out_of_scope_is_refused_on_save(
    artifacts: EventStoreArtifactService, app_name: str, user_id: str, words: str
) -> None:
    from google.adk.errors.input_validation_error import InputValidationError

    await artifacts.save_artifact(app_name=app_name, user_id=user_id, filename="user:secret",
                                  artifact=types.Part(text="secret"))
    ref = types.Part(file_data=types.FileData(
        file_uri=f"artifact://apps/{app_name}/users/{user_id}/artifacts/user:secret/versions/0",
        mime_type="text/plain",
    ))
    scope: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s"}
    with pytest.raises(InputValidationError, match=words):
        await artifacts.save_artifact(filename="ref", artifact=ref, **scope)
    bad = types.Part(file_data=types.FileData(file_uri="artifact://apps/x/nothing"))
    with pytest.raises(InputValidationError, match="Invalid artifact reference"):
        await artifacts.save_artifact(filename="ref", artifact=bad, **scope)
    assert await artifacts.list_versions(filename="ref", **scope) == []


@pytest.mark.parametrize("field", ["app_name", "user_id", "session_id"])
@pytest.mark.parametrize(("value", "words"), [
    ("", "must not be empty"),
    ("a\x00b", "null bytes"),
    ("../up", "traversal"),
    ("/root", "absolute path"),
    ("C:drive", "drive-qualified"),
    ("victim/sessions/s1", "reserved path segments"),
])
async def test_artifact_ids_adk_refuses_are_refused_by_every_call(
    artifacts: EventStoreArtifactService, field: str, value: str, words: str
) -> None:
    from google.adk.errors.input_validation_error import InputValidationError

    scope: dict[str, Any] = {"app_name": APP, "user_id": "u", "session_id": "s", field: value}
    part = types.Part(text="x")
    calls = [
        artifacts.save_artifact(filename="f", artifact=part, **scope),
        artifacts.load_artifact(filename="f", **scope),
        artifacts.delete_artifact(filename="f", **scope),
        artifacts.list_artifact_keys(**scope),
        artifacts.list_versions(filename="f", **scope),
        artifacts.list_artifact_versions(filename="f", **scope),
        artifacts.get_artifact_version(filename="f", **scope),
    ]
    for call in calls:
        with pytest.raises(InputValidationError, match=words):
            await call


async def test_artifact_namespaced_ids_adk_accepts_work(
    artifacts: EventStoreArtifactService,
) -> None:
    scope: dict[str, Any] = {"app_name": "projects/1/locations/l/reasoningEngines/2",
                             "user_id": "group/u1", "session_id": "s"}
    assert await artifacts.save_artifact(filename="f", artifact=types.Part(text="x"),
                                         **scope) == 0
    assert await artifacts.load_artifact(filename="f", **scope) == types.Part(text="x")
    # a user: artifact ignores the session id, as ADK's services do
    assert await artifacts.save_artifact(filename="user:g", artifact=types.Part(text="y"),
                                         app_name=APP, user_id="u", session_id="/ignored") == 0
