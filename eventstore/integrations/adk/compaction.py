"""ADK's compaction events (``EventActions.compaction``), stored natively and honoured on load.

ADK records a compaction as an event whose ``actions.compaction`` holds a summary and the
timestamp range it stands for. The session service stores it as the store's own compaction
event (``eventstore.Compaction``, kind ``compaction``). The timestamps become the seq range of
the events they cover, ADK's exact JSON stays in the extension field as before (the round trip
is exact), and the extension's ``"compaction"`` entry adds what loading needs:

- ``"previous"``: the seq of the compaction event before it (``None`` for the first);
- ``"keep"``: the seqs of the covered events ADK still needs, which are long-running calls and
  the responses to them. ADK puts back a call whose response arrives after the compaction
  (``_recover_compacted_function_calls``), so that call must be loaded.

``get_session`` (without a ``GetSessionConfig``) then reads backwards to the newest compaction and
follows the ``previous`` links one row each. It stops at a compaction that starts at the session's
first event, since every older one lies inside it. It returns those compaction events, the kept
events, the events before the first compaction's range, and the events after the newest one's range.
ADK's contents processor builds the same request from that as from the whole history
(``tests/eventstore/integrations/adk/test_adk_compaction.py`` checks it), and the events it does not
need are never read.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from google.adk.events import Event as AdkEvent

from eventstore import Compaction, Content, Event, EventStore, Part
from eventstore._gcpause import pause as pause_collector
from eventstore._gcpause import resume as resume_collector

from .events import EXTENSION_KEY

__all__ = ["compacted_adk_events", "with_native_compaction"]

_PAGE = 64


class Addressed(Protocol):
    """A session as these functions address it in the store: its id, app and user (an ADK
    ``Session`` or a store ``Session``)."""

    @property
    def id(self) -> str: ...
    @property
    def app_name(self) -> str: ...
    @property
    def user_id(self) -> str: ...


async def with_native_compaction(store: EventStore, session: Addressed, stored: Event,
                                 raw: dict[str, Any]) -> Event:
    """``stored`` (an ADK event's store event) with its ADK compaction made native. Returned
    unchanged when ``raw`` (the ADK JSON) has no compaction, when the compaction's summary has
    parts the store has no native form for, or when its range holds no stored event."""
    actions = raw.get("actions") if isinstance(raw.get("actions"), dict) else None
    spec = actions.get("compaction") if actions else None
    if not isinstance(spec, dict) or stored.content is not None:
        return stored
    start_ts, end_ts = spec.get("start_timestamp"), spec.get("end_timestamp")
    summary = _native_summary(spec.get("compacted_content"))
    if not isinstance(start_ts, (int, float)) or not isinstance(end_ts, (int, float)) \
            or summary is None:
        return stored
    covered = await store.read_mappings(session.id, app_name=session.app_name,
        user_id=session.user_id, since=float(start_ts), compact=True)
    inside = [m for m in covered if m["timestamp"] <= end_ts and not _is_compaction(m)]
    if not inside:
        return stored
    history = await store.read_compacted(session.id, app_name=session.app_name,
                                         user_id=session.user_id)
    previous = history.compaction.seq if history.compaction is not None else None
    long_running = {call_id for m in inside for call_id in m.get("l", ())}
    keep = [m["seq"] for m in inside
            if m.get("l") or any(p.get("fr", [None])[0] in long_running
                                 for p in (m.get("c") or {}).get("p", ()) if "fr" in p)]
    ext = dict(stored.custom_metadata.get(EXTENSION_KEY) or {})
    ext["compaction"] = {"previous": previous, "keep": keep}
    return dataclasses.replace(
        stored,
        actions=dataclasses.replace(stored.actions, compaction=Compaction(
            start_seq=inside[0]["seq"], end_seq=inside[-1]["seq"], summary=summary)),
        custom_metadata={**stored.custom_metadata, EXTENSION_KEY: ext},
    )


def _native_summary(raw: Any) -> Content | None:
    """The summary as a store Content when it is only text parts (what ADK's summarizer
    writes), else None (the compaction then stays in the extension only)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("parts"), list) or not raw["parts"]:
        return None
    texts = [p.get("text") for p in raw["parts"] if isinstance(p, dict)]
    if len(texts) != len(raw["parts"]) or not all(isinstance(t, str) for t in texts) or any(
            set(p) - {"text"} for p in raw["parts"]):
        return None
    role = raw.get("role")
    return Content(role="user" if role == "user" else "model",
                   parts=tuple(Part(text=t) for t in texts))


def _is_compaction(mapping: dict[str, Any]) -> bool:
    return "cp" in (mapping.get("a") or {})


async def compacted_adk_events(
    store: EventStore, session: Addressed, *, upto: int, convert: Any
) -> list[AdkEvent]:
    """The ADK events ``get_session`` returns for a compacted session (module docstring), in
    log order; without a native compaction, every event (the scan that looked for one read
    them all).
    ``convert`` builds an ADK event from a stored mapping (None for a creation event)."""
    # The events newer than the newest compaction, newest first, converted page by page as
    # the backwards scan reads them: no mapping outlives its page (a whole log's mappings
    # held while converting cost more than the conversion, collector traversals included).
    tail: list[AdkEvent | None] = []
    tail_seqs: list[int] = []
    newest: dict[str, Any] | None = None
    cursor, size = upto, 16
    while newest is None and cursor > 0:
        page = await store.read_mappings(session.id, app_name=session.app_name,
        user_id=session.user_id, upto=cursor, backwards=True, limit=size,
                                         compact=True)
        newer = page
        for i, mapping in enumerate(page):
            if _is_compaction(mapping):
                newest, newer = mapping, page[:i]
                break
        tail_seqs.extend(m["seq"] for m in newer)
        tail.extend(_converted(newer, convert))
        if len(page) < size:
            break
        # Pages grow fast: a log without compaction is read whole, and each page is a round
        # trip to the database's thread, which a loaded machine makes costly.
        cursor, size = page[-1]["seq"] - 1, min(size * 4, 8192)
    if newest is None:
        # No compaction: the scan read the whole log, so it is the answer (not read twice).
        tail.reverse()
        return [e for e in tail if e is not None]
    chain = [newest]
    while True:
        start = chain[-1]["a"]["cp"][0]
        previous = ((chain[-1].get("m") or {}).get(EXTENSION_KEY) or {}).get(
            "compaction", {}).get("previous")
        if start <= 2 or not isinstance(previous, int):
            break
        found = await store.read_mappings(session.id, app_name=session.app_name,
        user_id=session.user_id, after=previous - 1, upto=previous,
                                          compact=True)
        if not found or not _is_compaction(found[0]):
            break
        chain.append(found[0])
    end = newest["a"]["cp"][1]
    first_start = min(c["a"]["cp"][0] for c in chain)
    built: dict[int, AdkEvent | None] = {
        seq: event for seq, event in zip(tail_seqs, tail, strict=True) if seq > end}
    wanted: dict[int, dict[str, Any]] = {}
    for compaction in chain:
        wanted[compaction["seq"]] = compaction
    kept = {s for c in chain for s in
            ((c.get("m") or {}).get(EXTENSION_KEY) or {}).get("compaction", {}).get("keep", ())}
    for seq in sorted(kept - wanted.keys() - built.keys()):
        wanted.update({m["seq"]: m for m in await store.read_mappings(
            session.id, app_name=session.app_name, user_id=session.user_id, after=seq - 1,
            upto=seq, compact=True)})
    if first_start > 1:
        wanted.update({m["seq"]: m for m in await store.read_mappings(
            session.id, app_name=session.app_name, user_id=session.user_id,
            upto=first_start - 1, compact=True)})
    if end < newest["seq"] - 1:  # events after the range but before the compaction event
        wanted.update({m["seq"]: m for m in await store.read_mappings(
            session.id, app_name=session.app_name, user_id=session.user_id, after=end,
            upto=newest["seq"] - 1, compact=True)})
    built.update(zip(wanted, _converted(list(wanted.values()), convert), strict=True))
    return [e for e in (built[seq] for seq in sorted(built)) if e is not None]


def _converted(mappings: list[dict[str, Any]], convert: Any) -> list[AdkEvent | None]:
    """``convert`` of each mapping, with the cyclic collector paused over a long batch: the
    events built are kept, so traversing them in the young generations is wasted
    (``eventstore._gcpause``)."""
    paused = pause_collector(len(mappings))
    try:
        return [convert(m) for m in mappings]
    finally:
        resume_collector(paused)
