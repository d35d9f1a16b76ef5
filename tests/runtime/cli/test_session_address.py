"""``evs`` finds a session by the id its app gave it; when several apps or users hold that id it
says so, lists them and exits 2, and ``--app``/``--user`` pick one (a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from _cli_support import AGENT, build, call, invoke, make_session, paused_weather_log

from eventstore import Content, Event, EventActions, EventStore, Part


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "users.db"

    async def work(store: EventStore) -> None:
        for user in ("alice", "bob"):
            await store.create_session(app_name="app", user_id=user, session_id="default",
                                       state={"who": user})
            await store.append("default", Event(
                author="user", content=Content(role="user", parts=(Part(text=f"hi {user}"),)),
                actions=EventActions(state_delta={"said": user}),
            ), expected_version=1, app_name="app", user_id=user)
        await store.create_session(app_name="app", user_id="carol", session_id="solo")

    build(f"sqlite+aiosqlite:///{path}", work)
    return path


@pytest.mark.parametrize("command", [
    pytest.param(["show"], id="show"),
    pytest.param(["state"], id="state"),
    pytest.param(["verify"], id="verify"),
    pytest.param(["fork", "--at", "1"], id="fork"),
    pytest.param(["delete", "--yes"], id="delete"),
    pytest.param(["tail", "--max-events", "1", "--timeout", "1"], id="tail"),
])
def test_ambiguous_id_lists_choices_and_exits_2(tmp_path: Path, command: list[str]) -> None:
    db = _db(tmp_path)
    result = invoke(command[0], "default", *command[1:], "--db", str(db))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Session id 'default' is held by 2 sessions" in result.stderr
    assert "--app app --user alice" in result.stderr
    assert "--app app --user bob" in result.stderr
    # Nothing was changed: both sessions are still there, each with its own events.
    for user in ("alice", "bob"):
        shown = invoke("show", "default", "--user", user, "--db", str(db), "--json")
        assert shown.exit_code == 0, shown.stderr


def test_app_and_user_pick_the_session(tmp_path: Path) -> None:
    db = _db(tmp_path)
    for user in ("alice", "bob"):
        shown = invoke("show", "default", "--app", "app", "--user", user, "--db", str(db))
        assert shown.exit_code == 0, shown.stderr
        assert f"hi {user}" in shown.stdout
        other = "bob" if user == "alice" else "alice"
        assert f"hi {other}" not in shown.stdout
        state = orjson.loads(invoke("state", "default", "--user", user, "--db", str(db),
                                    "--json").stdout)
        assert state["state"] == {"who": user, "said": user}
    assert invoke("verify", "default", "--user", "bob", "--db", str(db)).exit_code == 0
    # Verifying every session walks both "default"s without asking which.
    everything = invoke("verify", "--db", str(db), "--json")
    assert everything.exit_code == 0, everything.stderr
    assert orjson.loads(everything.stdout)["sessions_checked"] == 3


def test_fork_and_delete_with_user(tmp_path: Path) -> None:
    db = _db(tmp_path)
    forked = invoke("fork", "default", "--at", "2", "--new-id", "copy", "--user", "bob",
                    "--db", str(db), "--json")
    assert forked.exit_code == 0, forked.stderr
    listed = orjson.loads(invoke("sessions", "--db", str(db), "--json").stdout)["sessions"]
    assert ("copy", "app", "bob") in {(s["id"], s["app_name"], s["user_id"]) for s in listed}
    gone = invoke("delete", "default", "--user", "bob", "--yes", "--db", str(db))
    assert gone.exit_code == 0, gone.stderr
    # One "default" is left: the bare id finds it again.
    left = orjson.loads(invoke("state", "default", "--db", str(db), "--json").stdout)
    assert left["state"]["who"] == "alice"


def test_wrong_user_is_not_found(tmp_path: Path) -> None:
    db = _db(tmp_path)
    result = invoke("show", "solo", "--user", "mallory", "--db", str(db))
    assert result.exit_code == 1
    assert "Session 'solo' does not exist for user 'mallory'" in result.stderr
    assert invoke("show", "solo", "--db", str(db)).exit_code == 0


def test_sessions_lists_app_and_user(tmp_path: Path) -> None:
    db = _db(tmp_path)
    out = invoke("sessions", "--db", str(db)).stdout
    lines = [line.split() for line in out.splitlines() if "default" in line]
    assert sorted(line[:3] for line in lines) == [["app", "alice", "default"],
                                                  ["app", "bob", "default"]]


def test_export_and_import_carry_app_user_and_id(tmp_path: Path) -> None:
    db = _db(tmp_path)
    dump = tmp_path / "bob.jsonl"
    ambiguous = invoke("export", "default", "--db", str(db), "--output", str(dump))
    assert ambiguous.exit_code == 2
    assert "--app app --user bob" in ambiguous.stderr
    exported = invoke("export", "default", "--app", "app", "--user", "bob", "--db", str(db),
                      "--output", str(dump))
    assert exported.exit_code == 0, exported.stderr
    header = orjson.loads(dump.read_bytes().splitlines()[0])
    assert (header["app_name"], header["user_id"], header["session_id"]) == (
        "app", "bob", "default")
    before = orjson.loads(invoke("show", "default", "--user", "bob", "--db", str(db),
                                 "--json").stdout)["events"]
    assert invoke("delete", "default", "--user", "bob", "--yes", "--db", str(db)).exit_code == 0
    # Re-created by (app, user, id) beside alice's "default".
    imported = invoke("import", str(dump), "--db", str(db))
    assert imported.exit_code == 0, imported.stderr
    after = orjson.loads(invoke("show", "default", "--user", "bob", "--db", str(db),
                                "--json").stdout)["events"]
    assert after == before
    again = invoke("import", str(dump), "--db", str(db))
    assert again.exit_code == 1
    assert "already exists" in again.stderr


def _two_paused(paused_db: Path) -> Path:
    """The paused weather session ``s1`` of user ada, and the same log as bob's ``s1`` with
    one call more, ``c9``, started and never answered (in doubt: what ``evs rerun`` decides)."""
    in_doubt = [
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c9", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c9",)),
    ]
    make_session(str(paused_db), [*paused_weather_log(), *in_doubt], state={"units": "metric"},
                 user_id="bob")
    return paused_db


def _events(db: Path, user: str) -> list[tuple[int, str]]:
    """(seq, event id) of user's ``s1``: what was appended, not how ``show`` reads it."""
    shown = invoke("show", "s1", "--app", "weather", "--user", user, "--db", str(db), "--json")
    assert shown.exit_code == 0, shown.stderr
    return [(e["seq"], e["id"]) for e in orjson.loads(shown.stdout)["events"]]


ANSWERS = [
    pytest.param(["pending"], False, id="pending"),
    pytest.param(["confirm", "s1", "confirm-1", "--yes"], True, id="confirm"),
    pytest.param(["respond", "s1", "c4", "--result", '{"days": []}'], True, id="respond"),
    pytest.param(["rerun", "s1", "c9", "--force"], True, id="rerun"),
    pytest.param(["compact", "s1", "--summary", "The weather so far."], True, id="compact"),
]


@pytest.mark.parametrize(("command", "writes"), ANSWERS)
def test_answering_commands_pick_the_session_by_app_and_user(
    paused_db: Path, command: list[str], writes: bool
) -> None:
    db = _two_paused(paused_db)
    args = command if command[0] != "pending" else [*command, "s1"]
    before = {user: _events(db, user) for user in ("ada", "bob")}
    refused = invoke(*args, "--db", str(db))
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert "Session id 's1' is held by 2 sessions" in refused.stderr
    assert "--app weather --user ada" in refused.stderr
    assert "--app weather --user bob" in refused.stderr
    assert {user: _events(db, user) for user in ("ada", "bob")} == before

    done = invoke(*args, "--app", "weather", "--user", "bob", "--db", str(db))
    assert done.exit_code == 0, done.stdout + done.stderr
    after = {user: _events(db, user) for user in ("ada", "bob")}
    assert after["ada"] == before["ada"]
    assert len(after["bob"]) == len(before["bob"]) + (1 if writes else 0)
    assert after["bob"][:len(before["bob"])] == before["bob"]


def test_pending_prints_commands_that_name_the_user(paused_db: Path) -> None:
    db = _two_paused(paused_db)
    shown = invoke("pending", "s1", "--user", "bob", "--db", str(db), "--json")
    assert shown.exit_code == 0, shown.stderr
    commands = [item["command"] for item in orjson.loads(shown.stdout)["pending"]]
    assert commands
    assert all("--app weather --user bob s1" in c for c in commands), commands
    # Each printed command runs as printed (here: the confirmation's).
    [confirm] = [c for c in commands if " confirm " in c]
    args = confirm.split("   ")[0].split()[1:]
    done = invoke(*args)
    assert done.exit_code == 0, done.stderr
    assert len(_events(db, "bob")) == len(_events(db, "ada")) + 3  # c9 and its start, the answer
