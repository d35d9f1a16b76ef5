"""``evs compact``: a compaction through ``runtime.compact``, marked by show and state."""

from __future__ import annotations

from pathlib import Path

import orjson
from _cli_support import file_fingerprint, invoke


def test_compact_refuses_a_range_with_an_open_call_and_writes_nothing(paused_db: Path) -> None:
    before = file_fingerprint(paused_db)
    result = invoke("compact", "s1", "--upto", "7", "--summary", "Paris: sunny.",
                    "--db", str(paused_db))
    assert result.exit_code == 1
    assert ("call 'c3' at seq 6 is still open (see `evs pending s1`): answer it first, or "
            "compact up to seq 5") in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert file_fingerprint(paused_db) == before


def test_compact_records_the_summary_and_show_and_state_mark_it(paused_db: Path) -> None:
    pending_before = invoke("pending", "s1", "--json", "--db", str(paused_db)).stdout
    result = invoke("compact", "s1", "--upto", "5", "--summary", "Paris: sunny, 21°C.",
                    "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ("Session s1 compacted: the summary at seq 10 stands for seq 1..5 in "
                             "the model's requests (nothing was deleted).\n")
    assert invoke("pending", "s1", "--json", "--db", str(paused_db)).stdout == pending_before

    shown = invoke("show", "s1", "--db", str(paused_db)).stdout
    assert ("▤ compaction: the summary stands for #1..#5 in the model's requests (those events "
            "are kept)") in shown
    assert "summary: “Paris: sunny, 21°C.”" in shown
    assert "#1 " in shown  # the covered events are still shown
    events = orjson.loads(invoke("show", "s1", "--json", "--db", str(paused_db)).stdout)["events"]
    assert len(events) == 10
    assert events[-1]["kind"] == "compaction"
    assert events[-1]["compaction"] == {"start_seq": 1, "end_seq": 5,
                                        "summary": "Paris: sunny, 21°C."}

    state = invoke("state", "s1", "--db", str(paused_db)).stdout
    assert "#10 compaction: the summary stands for #1..#5" in state
    assert "the state folds every event" in state
    as_json = orjson.loads(invoke("state", "s1", "--json", "--db", str(paused_db)).stdout)
    assert as_json["compaction"] == {"seq": 10, "start_seq": 1, "end_seq": 5}
    assert as_json["state"]["last_city"] == "Paris"  # state still folds the covered events
    earlier = orjson.loads(invoke("state", "s1", "--at", "9", "--json",
                                  "--db", str(paused_db)).stdout)
    assert earlier["compaction"] is None


def test_compact_json_and_a_second_compaction_must_cover_more(paused_db: Path) -> None:
    first = invoke("compact", "s1", "--upto", "2", "--summary", "asked", "--json",
                   "--db", str(paused_db))
    payload = orjson.loads(first.stdout)
    assert {k: payload[k] for k in ("seq", "start_seq", "end_seq")} == {
        "seq": 10, "start_seq": 1, "end_seq": 2}
    again = invoke("compact", "s1", "--upto", "2", "--summary", "x", "--db", str(paused_db))
    assert again.exit_code == 1
    assert "compacted up to seq 2 already" in again.stderr
    default = invoke("compact", "s1", "--summary", "more", "--json", "--db", str(paused_db))
    assert orjson.loads(default.stdout)["start_seq"] == 3
    assert orjson.loads(default.stdout)["end_seq"] == 5  # stops before the open call at 6


def test_compact_without_summary_needs_a_registered_agent(paused_db: Path) -> None:
    result = invoke("compact", "s1", "--upto", "5", "--db", str(paused_db))
    assert result.exit_code == 1
    assert "Give the summary with --summary: no agent is registered for app 'weather'" in (
        result.stderr)
