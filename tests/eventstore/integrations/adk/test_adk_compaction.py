"""ADK's compaction events through the session service: stored as the store's own compaction
events, read back exactly, and honoured by ``get_session`` (the covered events are not loaded,
and ADK builds the same request from what is loaded)."""

from __future__ import annotations

from _extras import require_extra

adk = require_extra("google.adk", "adk")

from google.adk.events import Event, EventActions  # noqa: E402
from google.adk.events.event_actions import EventCompaction  # noqa: E402
from google.adk.flows.llm_flows.context._compaction import (  # noqa: E402
    _process_compaction_events,
)
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.adk import EventStoreSessionService  # noqa: E402

APP = "app"


def _text(author: str, text: str, ts: float) -> Event:
    return Event(invocation_id=f"inv-{int(ts)}", author=author, timestamp=ts,
                 content=types.Content(role="user" if author == "user" else "model",
                                       parts=[types.Part(text=text)]))


def _compaction(start: float, end: float, text: str, ts: float) -> Event:
    return Event(invocation_id=f"inv-c{int(ts)}", author="user", timestamp=ts,
                 actions=EventActions(compaction=EventCompaction(
                     start_timestamp=start, end_timestamp=end,
                     compacted_content=types.Content(role="model",
                                                     parts=[types.Part(text=text)]))))


def _texts(events: list[Event]) -> list[str]:
    return [p.text or "" for e in events if e.content for p in e.content.parts or ()]


async def test_adk_compaction_round_trip_and_get_session_honours_it(store: EventStore) -> None:
    service = EventStoreSessionService(store)
    session = await service.create_session(app_name=APP, user_id="u", state={"k": 1})
    for i in range(1, 41):
        session = await service.get_session(app_name=APP, user_id="u", session_id=session.id) \
            or session
        await service.append_event(session, _text("user" if i % 2 else "agent", f"t{i}",
                                                  float(i)))
    first = _compaction(1.0, 20.0, "summary of 1-20", 40.5)
    await service.append_event(session, first)
    for i in range(41, 45):
        await service.append_event(session, _text("user" if i % 2 else "agent", f"t{i}",
                                                  float(i)))
    second = _compaction(15.0, 40.0, "summary of 15-40", 44.5)
    await service.append_event(session, second)
    await service.append_event(session, _text("user", "t45", 45.0))

    stored = [e for e in await store.read(session.id) if e.actions.compaction is not None]
    assert [(e.actions.compaction.start_seq, e.actions.compaction.end_seq)
            for e in stored if e.actions.compaction] == [(2, 21), (16, 41)]
    assert stored[0].actions.compaction is not None
    assert stored[0].actions.compaction.summary.parts[0].text == "summary of 1-20"

    whole = await service.get_session(app_name=APP, user_id="u", session_id=session.id,
                                      config=GetSessionConfig())
    loaded = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert whole is not None
    assert loaded is not None
    assert len(whole.events) == 47
    # The newest compaction and every event after its range (the older compaction among
    # them); none of the events it covers.
    assert [e.id for e in loaded.events] == [e.id for e in whole.events if e.timestamp > 40.0]
    assert first.id in [e.id for e in loaded.events]
    assert [e for e in loaded.events if e.id == first.id] == [first]  # exact round trip
    assert [e for e in loaded.events if e.id == second.id] == [second]
    assert loaded.state == whole.state
    assert _texts(_process_compaction_events(loaded.events, "agent")) == _texts(
        _process_compaction_events(whole.events, "agent"))
    # The session object get_session returned can be appended to.
    await service.append_event(loaded, _text("agent", "t46", 46.0))
