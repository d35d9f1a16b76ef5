"""The pure parts of the CLI: pairing calls with answers, integrity checks, the export format."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from _cli_support import AGENT, call, finishing_log, paused_weather_log, response

from eventstore import (
    SCHEMA_VERSION,
    Content,
    Event,
    EventActions,
    EventStore,
    StoredEvent,
    event_kind,
)
from eventstore._chain import GENESIS, chain_hashes
from eventstore._codec import encode_event
from eventstore._state import has_shared_keys
from eventstore.commands._exchange import (
    ExportedArtifact,
    ExportFormatError,
    dump_artifact,
    dump_event,
    dump_header,
    parse_export,
    referenced_artifacts,
)
from eventstore.commands._timeline import analyze
from eventstore.commands._verify import check_artifacts, check_log, check_snapshots


def _numbered(events: list[Event]) -> list[Event]:
    return [dataclasses.replace(e, seq=n) for n, e in enumerate(events, start=1)]


def _rows(events: list[Event], session_id: str = "s1") -> list[StoredEvent]:
    """The rows as a store writes them: chained (``eventstore._chain``), flagged when their delta
    changes ``user:``/``app:`` state."""
    rows = [
        StoredEvent(session_id=session_id, seq=n, position=n, event_id=e.id,
                    kind=event_kind(e), invocation_id=e.invocation_id, author=e.author,
                    timestamp=e.timestamp, shared_state=has_shared_keys(e.actions.state_delta),
                    schema_version=SCHEMA_VERSION,
                    payload=encode_event(e))
        for n, e in enumerate(events, start=1)
    ]
    hashes = chain_hashes(GENESIS, 1, rows)
    return [dataclasses.replace(r, chain_hash=h) for r, h in zip(rows, hashes, strict=True)]


def test_timeline_paused_session_pairs_calls_and_confirmation() -> None:
    timeline = analyze(_numbered(paused_weather_log()))
    assert timeline.status("c1") == "answered"
    assert timeline.calls["c1"].final_answer is not None
    assert timeline.calls["c1"].final_answer.seq == 4
    assert timeline.status("c3") == "awaiting_confirmation"
    assert timeline.status("c4") == "long_running"
    assert timeline.calls["c3"].confirmation_ids == ["confirm-1"]
    confirmation = timeline.confirmations["confirm-1"]
    assert (confirmation.seq, confirmation.answer_seq) == (8, None)
    assert confirmation.hint == "This lookup costs $0.10."
    assert [r.call.id for r in timeline.open_calls()] == ["c3", "c4", "confirm-1"]


def test_timeline_finished_session_has_nothing_open() -> None:
    timeline = analyze(_numbered(paused_weather_log() + finishing_log()))
    assert timeline.open_calls() == []
    assert timeline.confirmations["confirm-1"].confirmed is True
    assert timeline.calls["c3"].final_answer is not None
    assert timeline.calls["c3"].final_answer.seq == 11


def test_timeline_started_without_response_is_in_doubt() -> None:
    events = _numbered([
        Event(author=AGENT, content=Content(role="model", parts=(call("c9", "charge"),))),
        Event(author=AGENT, started_call_ids=("c9",)),
    ])
    assert analyze(events).status("c9") == "in_doubt"
    assert analyze(events[:1]).status("c9") == "not_started"


def test_timeline_confirmation_answer_as_json_string() -> None:
    answer = response("confirm-1", "adk_request_confirmation", response='{"confirmed": false}')
    events = [*paused_weather_log(),
              Event(author="user", content=Content(role="user", parts=(answer,)))]
    assert analyze(_numbered(events)).confirmations["confirm-1"].confirmed is False


def test_verify_clean_log_has_no_findings() -> None:
    events = paused_weather_log() + finishing_log()
    findings, decoded = check_log("s1", _rows(events), version=len(events),
                                  decode=EventStore.decode)
    assert findings == []
    assert len(decoded) == len(events)


@pytest.mark.parametrize(
    ("mutate", "code", "seq"),
    [
        pytest.param(lambda rows: rows[:3] + rows[4:], "seq_gap", 5, id="gap"),
        pytest.param(lambda rows: [*rows, dataclasses.replace(rows[0], seq=len(rows) + 1)],
                     "duplicate_event_id", 9, id="duplicate-id"),
        pytest.param(lambda rows: [*rows[:2], dataclasses.replace(rows[2], payload=b"{oops"),
                                   *rows[3:]], "undecodable", 3, id="garbage-payload"),
        pytest.param(lambda rows: [*rows[:2], dataclasses.replace(rows[2], kind="message"),
                                   *rows[3:]], "kind_mismatch", 3, id="kind"),
    ],
)
def test_verify_raw_row_problems(mutate, code, seq) -> None:  # type: ignore[no-untyped-def]
    rows = mutate(_rows(paused_weather_log()))
    findings, _ = check_log("s1", rows, version=rows[-1].seq, decode=EventStore.decode)
    assert [(f.code, f.seq) for f in findings if f.code == code] == [(code, seq)]
    assert all(f.session_id == "s1" for f in findings)


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        pytest.param(Event(author="user", content=Content(role="user", parts=(
            response("nope", "get_weather", ok=True),))), "response_without_call", id="orphan"),
        pytest.param(Event(author=AGENT, content=Content(role="user", parts=(
            response("c1", "get_weather", temp_c=22),))), "answered_twice", id="twice"),
        pytest.param(Event(author=AGENT, content=Content(role="model", parts=(
            call("confirm-2", "adk_request_confirmation",
                 originalFunctionCall={"id": "c3", "name": "paid_lookup",
                                       "args": {"city": "Rome"}},
                 toolConfirmation={"hint": "", "confirmed": False, "payload": None}),))),
            "confirmation_call_mismatch", id="confirm-args"),
        pytest.param(Event(author=AGENT, content=Content(role="model", parts=(
            call("confirm-3", "adk_request_confirmation",
                 originalFunctionCall={"id": "zz", "name": "paid_lookup", "args": {}},
                 toolConfirmation={"hint": "", "confirmed": False, "payload": None}),))),
            "confirmation_unknown_call", id="confirm-unknown"),
        pytest.param(Event(author=AGENT, content=Content(role="model", parts=(
            call("c1", "get_weather", city="Rome"),))), "duplicate_call_id", id="call-id-reuse"),
    ],
)
def test_verify_log_semantics(extra: Event, code: str) -> None:
    events = [*paused_weather_log(), extra]
    findings, _ = check_log("s1", _rows(events), version=len(events), decode=EventStore.decode)
    assert [(f.code, f.seq) for f in findings] == [(code, len(events))]


def test_verify_long_running_progress_updates_are_not_answered_twice() -> None:
    events = [*paused_weather_log(),
              Event(author="user", content=Content(role="user", parts=(
                  response("c4", "forecast", progress=0.5),))),
              Event(author="user", content=Content(role="user", parts=(
                  response("c4", "forecast", days=[]),)))]
    findings, _ = check_log("s1", _rows(events), version=len(events), decode=EventStore.decode)
    assert findings == []


def test_verify_version_mismatch() -> None:
    rows = _rows(paused_weather_log())
    findings, _ = check_log("s1", rows, version=len(rows) + 2, decode=EventStore.decode)
    assert [f.code for f in findings] == ["version_mismatch"]


def test_verify_snapshots_against_fold() -> None:
    events = _numbered(paused_weather_log())
    good = (4, {"last_city": "Paris"})
    assert check_snapshots("s1", events, [good, (2, {})]) == []
    [finding] = check_snapshots("s1", events, [(4, {"last_city": "Rome"})])
    assert (finding.code, finding.seq) == ("snapshot_mismatch", 4)
    assert "'last_city'" in finding.message


def _export_lines(events: list[Event], **header: object) -> list[bytes]:
    fields: dict[str, object] = {"app_name": "weather", "user_id": "ada", "session_id": "s1",
                                 "events": len(events), "created_at": 1.0}
    fields.update(header)
    return [dump_header(**fields), *(dump_event(e) for e in events)]  # type: ignore[arg-type]


_LOG = paused_weather_log()


def test_export_format_round_trips_events() -> None:
    events = paused_weather_log() + finishing_log()
    parsed = parse_export(_export_lines(events))
    assert (parsed.app_name, parsed.user_id, parsed.session_id) == ("weather", "ada", "s1")
    assert parsed.events == events


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param([], "empty", id="empty"),
        pytest.param([b"not json"], "line 1: the header is not valid JSON", id="bad-header"),
        pytest.param([b'{"format": "other"}'], "not an export", id="other-format"),
        pytest.param([*_export_lines(paused_weather_log())[:3], b'{"author": 1}'],
                     "line 4: not a valid event", id="bad-event"),
        pytest.param([*_export_lines(paused_weather_log())[:3], b"{oops"],
                     "line 4: not a valid event", id="malformed-line"),
        pytest.param(_export_lines(paused_weather_log())[:-2], "announces 8 events",
                     id="truncated"),
        pytest.param([*_export_lines(_LOG[:2]), dump_event(_LOG[0])],
                     "already appears on line 2", id="duplicate-id"),
    ],
)
def test_export_format_rejects(lines: list[bytes], message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        parse_export(lines)


def test_export_header_is_json_with_identity() -> None:
    header = orjson.loads(_export_lines([])[0])
    assert header["format"] == "agent-eventstore/session"
    assert header["version"] == 2
    assert header["session_id"] == "s1"


def _artifact(filename: str, version: int, data: bytes = b"x") -> ExportedArtifact:
    return ExportedArtifact(filename=filename, version=version, mime_type="text/plain",
                            created_at=1.5, data=data)


def _with_artifacts(*artifacts: ExportedArtifact) -> list[bytes]:
    return [*_export_lines(_LOG, artifacts=len(artifacts)), *map(dump_artifact, artifacts)]


def test_export_format_round_trips_artifacts_sorted_by_name_and_version() -> None:
    lines = _with_artifacts(_artifact("user:b", 0, b"\x00\xff"), _artifact("a", 1),
                            _artifact("a", 0, b""))
    parsed = parse_export(lines)
    assert parsed.events == _LOG
    assert parsed.created_at == 1.0
    assert [(a.filename, a.version, a.data, a.user_scoped) for a in parsed.artifacts] == [
        ("a", 0, b"", False), ("a", 1, b"x", False), ("user:b", 0, b"\x00\xff", True)]


def test_export_format_version_1_is_still_read() -> None:
    header = orjson.loads(_export_lines(_LOG)[0])
    header["version"] = 1
    del header["artifacts"]
    parsed = parse_export([orjson.dumps(header), *_export_lines(_LOG)[1:]])
    assert parsed.events == _LOG
    assert parsed.artifacts == []


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param(_with_artifacts(_artifact("a", 0), _artifact("a", 2), _artifact("a", 3)),
                     r"line 11: artifact 'a' has version 2 but lacks version\(s\) 1;",
                     id="gap"),
        pytest.param(_with_artifacts(_artifact("user:p", 1)),
                     r"artifact 'user:p' has version 1 but lacks version\(s\) 0;",
                     id="no-version-0"),
        pytest.param(_with_artifacts(_artifact("a", 0), _artifact("a", 0)),
                     "line 11: artifact 'a' version 0 already appears on line 10",
                     id="duplicate"),
        pytest.param(_with_artifacts(_artifact("a", 0), _artifact("a", 1))[:-1],
                     "announces 2 artifact versions but the file has 1", id="truncated"),
        pytest.param([*_export_lines(_LOG, artifacts=1),
                      b'{"artifact": {"filename": "a", "version": 0, "mime_type": "t", '
                      b'"created_at": 1, "data": "%%%"}}'],
                     "line 10: artifact 'a' version 0: 'data' is not valid base64",
                     id="bad-base64"),
        pytest.param([*_export_lines(_LOG, artifacts=1),
                      b'{"artifact": {"filename": "a", "version": -1}}'],
                     "line 10: artifact 'a' needs an integer 'version' >= 0", id="bad-version"),
    ],
)
def test_export_format_rejects_bad_artifacts(lines: list[bytes], message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        parse_export(lines)


def test_referenced_artifacts_reads_deltas_and_parts() -> None:
    events = [*paused_weather_log(), *finishing_log(),
              Event(author=AGENT, actions=EventActions(artifact_delta={"user:p": 2})),
              Event(author=AGENT, actions=EventActions(artifact_delta={"user:p": 1}))]
    assert referenced_artifacts(events) == {"report.txt": 0, "user:p": 2}


def test_check_artifacts_flags_versions_that_are_not_stored() -> None:
    events = _numbered(paused_weather_log() + finishing_log())
    assert check_artifacts("s1", events, {"report.txt": [0]}) == []
    findings = check_artifacts("s1", events, {"report.txt": [1, 2]})
    assert [(f.seq, f.code) for f in findings] == [(13, "artifact_missing")] * 2
    assert findings[0].message == ("artifact_delta names artifact 'report.txt' version 0, which "
                                   "does not exist (the stored versions are 1, 2).")
    [missing] = check_artifacts("s1", [dataclasses.replace(events[0], actions=EventActions(
        artifact_delta={"user:p": 0}))], {})
    assert "no version of it is stored" in missing.message
