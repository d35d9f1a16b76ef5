"""``evs state`` and ``evs show`` on ``None`` values and deletions: a key set to ``None`` is
shown as null (it is in the state), a deleted key is gone and the timeline says so."""

from __future__ import annotations

from pathlib import Path

import orjson
from _cli_support import invoke, make_session

from eventstore import Event, EventActions


def _log() -> list[Event]:
    return [
        Event(author="agent", actions=EventActions(
            state_delta={"draft": "x", "flag": True, "user:pref": "dark"})),
        Event(author="agent", actions=EventActions(
            state_delta={"flag": None, "user:pref": None}, state_deletions=("draft",))),
    ]


def test_state_shows_none_as_null_and_drops_deleted_keys(db: Path) -> None:
    make_session(str(db), _log())
    data = orjson.loads(invoke("state", "s1", "--db", str(db), "--json").stdout)
    assert data["state"] == {"flag": None, "user:pref": None}
    assert {row["key"]: row["seq"] for row in data["keys"]} == {"flag": 2, "user:pref": 2}
    assert orjson.loads(invoke("state", "s1", "--db", str(db), "--at", "1", "--json").stdout)[
        "state"] == {"draft": "x", "flag": True, "user:pref": "dark"}
    table = invoke("state", "s1", "--db", str(db)).stdout
    assert "flag" in table
    assert "null" in table
    assert "draft" not in table


def test_show_tells_a_none_value_from_a_deletion(db: Path) -> None:
    make_session(str(db), _log())
    out = invoke("show", "s1", "--db", str(db)).stdout
    assert "flag = null" in out
    assert "draft deleted" in out
    assert "flag deleted" not in out
    shown = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)
    events = shown["events"] if isinstance(shown, dict) else shown
    entries = [e for e in events if e.get("seq") == 2]
    assert entries
    assert entries[0]["state_delta"] == {"flag": None, "user:pref": None}
    assert entries[0]["state_deletions"] == ["draft"]
