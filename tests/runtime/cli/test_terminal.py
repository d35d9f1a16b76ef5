"""What a person at a terminal meets: escaped control characters, damage marked in ``evs
show``, re-run decisions, help texts and usage lines, ``--version``, ``delete``, ``tail``'s
announcement and the pagination hint."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from _cli_support import AGENT, call, invoke, make_session, response

from eventstore import Content, Event, EventActions, Part
from runtime.cli import app

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\x9b31m"


def _hostile_db(db: Path) -> None:
    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(
            Part(text=f"hello {HOSTILE} world"),))),
        Event(author=AGENT, turn_complete=True, long_running_tool_ids=("c\x1b[1A",),
              content=Content(role="model", parts=(call("c\x1b[1A", "to\x1bol", x=HOSTILE),))),
        Event(author=AGENT, actions=EventActions(state_delta={f"key{HOSTILE}": HOSTILE})),
        # A response to no call: verify names its id.
        Event(author="user", content=Content(role="user", parts=(
            response(f"o{HOSTILE}", "t", ok=True),))),
    ], session_id=f"s{HOSTILE}", app_name=f"app{HOSTILE}", user_id=f"u{HOSTILE}")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["sessions"], id="sessions"),
        pytest.param(["show", f"s{HOSTILE}"], id="show"),
        pytest.param(["state", f"s{HOSTILE}"], id="state"),
        pytest.param(["pending", f"s{HOSTILE}"], id="pending"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["tail", f"s{HOSTILE}", "--from-start", "--timeout", "0.2"], id="tail"),
        pytest.param(["show", f"x{HOSTILE}"], id="error-line"),
        pytest.param(["respond", f"s{HOSTILE}", "c\x1b[1A", "--result", "{}"], id="respond"),
        pytest.param(["delete", f"s{HOSTILE}", "--yes"], id="delete"),
    ],
)
def test_control_characters_never_reach_the_terminal(db: Path, args: list[str]) -> None:
    _hostile_db(db)
    result = invoke(*args, "--db", str(db))
    assert result.exit_code in (0, 1, 3), result.stderr
    shown = result.stdout + result.stderr
    for raw in ("\x1b", "\x9b", "\x07"):
        assert raw not in shown
    assert "\\x1b" in shown


def test_json_output_keeps_the_text_exact(db: Path) -> None:
    _hostile_db(db)
    shown = orjson.loads(invoke("show", f"s{HOSTILE}", "--db", str(db), "--json").stdout)
    assert shown["events"][0]["text"] == f"hello {HOSTILE} world"


def _damaged(db: Path) -> None:
    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text="hi"),))),
        Event(author=AGENT, content=Content(role="model", parts=(call("c1", "t"),))),
        Event(author=AGENT, content=Content(role="user", parts=(response("c1", "t", ok=1),))),
        Event(author=AGENT, content=Content(role="user", parts=(response("c1", "t", ok=2),))),
        Event(author=AGENT, content=Content(role="model", parts=(Part(text="five"),))),
        Event(author=AGENT, content=Content(role="model", parts=(Part(text="six"),))),
        Event(author=AGENT, content=Content(role="model", parts=(Part(text="seven"),))),
        Event(author=AGENT, content=Content(role="model", parts=(Part(text="eight"),))),
    ])
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM evs_events WHERE seq = 6")
        conn.execute("UPDATE evs_events SET seq = 7 WHERE seq = 8")
        conn.execute("UPDATE evs_events SET payload = CAST(payload AS TEXT) WHERE seq = 1")


def test_show_marks_damage_inline_with_verify_words(db: Path) -> None:
    _damaged(db)
    verify = orjson.loads(invoke("verify", "s1", "--db", str(db), "--json").stdout)
    codes = {(f["seq"], f["code"]) for f in verify["findings"]}
    # The hash chain (revision 0008) also names the deleted seq.
    assert codes == {(1, "undecodable"), (7, "seq_gap"), (7, "seq_order"),
                     (4, "answered_twice"), (6, "chain_deleted")}

    result = invoke("show", "s1", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    for finding in verify["findings"]:
        assert f"! {finding['code']}: {finding['message']}" in result.stdout
    assert any(line.startswith("#1") and "cannot be decoded" in line for line in lines)
    gap = lines.index("      ! seq_gap: seq 6 is missing before seq 7.")
    # The chain's finding about the deleted seq 6 stands where seq 6 would, just before.
    assert lines[gap - 1].startswith("      ! chain_deleted: seq 6 was deleted")
    assert lines[gap - 2].strip() == "“five”"
    assert lines[gap + 1].startswith("#7")
    # The repeated seq prints twice, and the second is marked.
    assert [line[:2] for line in lines if line.startswith("#7")] == ["#7", "#7"]
    repeat = lines.index("      ! seq_order: seq 7 appears again or out of order.")
    assert lines[repeat - 2].startswith("#7")

    shown = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)
    assert {(p["seq"], p["code"]) for p in shown["problems"]} == codes
    assert [e["seq"] for e in shown["events"]] == [2, 3, 4, 5, 7, 7]


def test_show_names_re_run_decisions(db: Path) -> None:
    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c1", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c1",)),
    ])
    assert invoke("rerun", "s1", "c1", "--db", str(db), "--force").exit_code == 0
    shown = invoke("show", "s1", "--db", str(db)).stdout
    assert "user  re-run decision" in shown
    assert "↻ re-run allowed: charge(amount=5) (call #2)  [c1]" in shown
    entry = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)["events"][-1]
    assert entry["rerun_call_ids"] == ["c1"]


def _commands() -> list[tuple[str, ...]]:
    import typer.main

    group = typer.main.get_command(app)
    found: list[tuple[str, ...]] = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        sub = getattr(command, "commands", None)
        found += [(name, s) for s in sub] if sub else [(name,)]
    return found


def test_help_summaries_are_whole_sentences() -> None:
    listing = invoke("--help").stdout
    commands = listing.split("Commands:")[1].splitlines()[1:]
    assert len(commands) == 22  # 17 commands, the db, memory and retention groups, mcp-server, web
    for line in commands:
        _name, summary = line.split(None, 1)
        assert summary.endswith("."), line
        assert "..." not in summary, line
        assert "``" not in summary, line


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_usage_lines_name_arguments_plainly(command: tuple[str, ...]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    usage = result.stdout.splitlines()[0]
    assert usage.startswith(f"Usage: evs {' '.join(command)} [OPTIONS]")
    assert "{" not in usage
    assert "``" not in result.stdout


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("evs (agent-eventstore) ")


def test_delete_with_yes(paused_db: Path) -> None:
    result = invoke("delete", "s1", "--yes", "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Deleted session s1 (app weather, user ada, 9 events")
    assert invoke("show", "s1", "--db", str(paused_db)).exit_code == 1


def test_delete_without_a_terminal_needs_yes(paused_db: Path) -> None:
    result = invoke("delete", "s1", "--db", str(paused_db))
    assert result.exit_code == 1
    assert "without asking: give --yes" in result.stderr
    assert invoke("show", "s1", "--db", str(paused_db)).exit_code == 0


@pytest.mark.parametrize(("answer", "deleted"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_delete_asks_on_a_terminal(paused_db: Path, monkeypatch: pytest.MonkeyPatch,
                                   answer: str, deleted: bool) -> None:
    monkeypatch.setattr("eventstore.commands._maintain._interactive", lambda: True)
    result = invoke("delete", "s1", "--db", str(paused_db), input=answer)
    assert "Delete session s1 (app weather, user ada, 9 events" in result.stderr
    assert (result.exit_code == 0) is deleted
    assert (invoke("show", "s1", "--db", str(paused_db)).exit_code == 1) is deleted


def test_delete_unknown_session(paused_db: Path) -> None:
    result = invoke("delete", "nope", "--yes", "--db", str(paused_db))
    assert result.exit_code == 1
    assert result.stderr == "evs: error: Session 'nope' does not exist.\n"


def test_tail_says_what_it_follows_on_stderr(paused_db: Path) -> None:
    result = invoke("tail", "s1", "--db", str(paused_db), "--timeout", "0.2")
    assert result.exit_code == 0
    assert result.stderr == "following s1 from seq 10; stops after 0.2 s; Ctrl-C to stop\n"
    assert result.stdout == ""
    everything = invoke("tail", "s1", "--db", str(paused_db), "--from-start", "--max-events",
                        "9")
    assert everything.stderr.startswith("following s1 from seq 1; stops after 9 event(s)")
    assert everything.stdout.startswith("#1 ")
    assert "#9 " in everything.stdout
    both = invoke("tail", "s1", "--db", str(paused_db), "--from-start", "--after", "3")
    assert both.exit_code == 2


def test_pagination_hint_repeats_the_filters(db: Path) -> None:
    for sid in ("a", "b", "c"):
        make_session(str(db), [], session_id=sid, app_name="weather", user_id="ada")
    make_session(str(db), [], session_id="z", app_name="other", user_id="ada")
    page = invoke("sessions", "--db", str(db), "--app", "weather", "--limit", "2",
                  "--sort", "id")
    [hint] = [line for line in page.stdout.splitlines() if line.startswith("More: ")]
    assert hint == f"More: evs sessions --db {db} --app weather --limit 2 --sort id --after b"
    following = invoke(*hint.split()[2:])
    assert [line.split()[2] for line in following.stdout.splitlines()[1:]] == ["c"]


LAYOUT_BREAKERS = "a\tb\nc\x07d\re\x08f"
"""Tab, newline, BEL, CR and backspace: each either breaks a table row or header line, or is
dropped by rich on its own (then the printed id is not the stored one)."""
SHOWN = "a\\tb\\nc\\x07d\\re\\x08f"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["sessions"], id="sessions"),
        pytest.param(["show", f"s{LAYOUT_BREAKERS}"], id="show"),
        pytest.param(["state", f"s{LAYOUT_BREAKERS}"], id="state"),
        pytest.param(["pending", f"s{LAYOUT_BREAKERS}"], id="pending"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["tail", f"s{LAYOUT_BREAKERS}", "--from-start", "--timeout", "0.2"],
                     id="tail"),
        pytest.param(["show", f"x{LAYOUT_BREAKERS}"], id="error-line"),
    ],
)
def test_every_control_character_is_escaped_the_same_visible_way(
    db: Path, args: list[str]
) -> None:
    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(
            Part(text=f"hi {LAYOUT_BREAKERS}"),))),
        Event(author=AGENT, actions=EventActions(state_delta={f"k{LAYOUT_BREAKERS}": 1})),
        Event(author="user", content=Content(role="user", parts=(
            response(f"o{LAYOUT_BREAKERS}", "t", ok=True),))),
    ], session_id=f"s{LAYOUT_BREAKERS}", app_name="app", user_id=f"u{LAYOUT_BREAKERS}")
    result = invoke(*args, "--db", str(db))
    assert result.exit_code in (0, 1, 3), result.stderr
    shown = result.stdout + result.stderr
    for raw in ("\t", "\x07", "\r", "\x08"):
        assert raw not in shown
    assert SHOWN in shown
