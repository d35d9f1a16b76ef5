"""``evs confirm`` and ``evs respond``: the runtime's answer APIs from the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from _cli_support import file_fingerprint, invoke


def _events(db: Path) -> list[dict[str, object]]:
    return orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)["events"]


def test_confirm_yes_appends_the_answer(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--yes", "--payload", '{"budget": 1}',
                    "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert "Confirmation confirm-1 of session s1 approved (seq 10)" in result.stdout
    last = _events(paused_db)[-1]
    assert last["author"] == "user"
    assert last["responses"] == [{
        "id": "confirm-1", "name": "adk_request_confirmation",
        "response": {"confirmed": True, "payload": {"budget": 1}}, "call_seq": 9,
        "error": False, "requests_confirmation": False}]
    pending = orjson.loads(invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)
    assert "confirmation" not in [p["kind"] for p in pending["pending"]]


def test_confirm_no_json_output(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--no", "--json", "--db", str(paused_db))
    assert orjson.loads(result.stdout) == {
        "session_id": "s1", "confirmation_id": "confirm-1", "confirmed": False, "payload": None,
        "seq": 10, "event_id": _events(paused_db)[-1]["id"]}


def test_confirm_twice_is_refused(paused_db: Path) -> None:
    assert invoke("confirm", "s1", "confirm-1", "--yes", "--db", str(paused_db)).exit_code == 0
    again = invoke("confirm", "s1", "confirm-1", "--no", "--db", str(paused_db))
    assert again.exit_code == 1
    assert "already answered at seq 10" in again.stderr
    assert len(again.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["confirm", "s1", "nope", "--yes"], "no confirmation request with id "
                     "'nope'", id="unknown-confirmation"),
        pytest.param(["confirm", "s1", "c4", "--yes"], "Record its result with evs respond "
                     "--db", id="not-a-confirmation"),
        pytest.param(["confirm", "s1", "c3", "--yes"], "It waits for confirmation confirm-1: "
                     "evs confirm --db", id="call-waiting-for-confirmation"),
        pytest.param(["confirm", "zz", "confirm-1", "--yes"], "Session 'zz' does not exist",
                     id="unknown-session"),
        pytest.param(["confirm", "s1", "confirm-1", "--yes", "--payload", "{bad"],
                     "--payload is not valid JSON", id="malformed-payload"),
        pytest.param(["respond", "s1", "c4", "--result", "{bad"], "--result is not valid JSON",
                     id="malformed-json"),
        pytest.param(["respond", "s1", "c4", "--result", "[1, 2]"], "must be a JSON object",
                     id="not-an-object"),
        pytest.param(["respond", "s1", "c1", "--result", "{}"], "already answered at seq 5",
                     id="already-answered"),
        pytest.param(["respond", "s1", "confirm-1", "--result", "{}"], "'confirm-1' is a "
                     "confirmation request: answer it with evs confirm --db",
                     id="confirmation-via-respond"),
        pytest.param(["respond", "s1", "c3", "--result", "{}"], "Call 'c3' waits for a human's "
                     "confirmation, not for a result: evs confirm --db",
                     id="respond-to-a-call-awaiting-confirmation"),
        pytest.param(["rerun", "s1", "c3"], "Call 'c3' waits for a human's confirmation",
                     id="rerun-a-call-awaiting-confirmation"),
        pytest.param(["rerun", "s1", "c4", "--force"], "is long-running (or deferred): it "
                     "waits for its result, not for a re-run decision",
                     id="rerun-a-long-running-call"),
        pytest.param(["respond", "s1", "nope", "--result", "{}"], "no function call with id "
                     "'nope'", id="unknown-call"),
    ],
)
def test_answer_errors_write_nothing(paused_db: Path, args: list[str], message: str) -> None:
    before = file_fingerprint(paused_db)
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert file_fingerprint(paused_db)[0] == before[0]


def test_confirm_needs_a_decision(paused_db: Path) -> None:
    result = invoke("confirm", "s1", "confirm-1", "--db", str(paused_db))
    assert result.exit_code == 2
    assert "--yes" in result.stderr


def test_answers_never_create_a_database(db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--result", "{}", "--db", str(db))
    assert result.exit_code == 1
    assert "There is no database" in result.stderr
    assert not db.exists()


def test_respond_records_the_long_running_result(paused_db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--result", '{"days": ["sun", "rain"]}',
                    "--db", str(paused_db))
    assert result.exit_code == 0, result.stderr
    assert "Result of call c4 of session s1 recorded (seq 10)" in result.stdout
    last = _events(paused_db)[-1]
    assert last["responses"][0]["name"] == "forecast"
    assert last["responses"][0]["response"] == {"days": ["sun", "rain"]}
    assert last["responses"][0]["call_seq"] == 6
    kinds = [p["kind"] for p in orjson.loads(
        invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)["pending"]]
    assert kinds == ["confirmation"]


def test_respond_reads_stdin_and_prints_json(paused_db: Path) -> None:
    result = invoke("respond", "s1", "c4", "--result", "-", "--json",
                    "--db", str(paused_db), input='{"ok": true}')
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["seq"] == 10


def _in_doubt_db(db: Path) -> Path:
    """Session s1: the agent called ``charge`` (c1), claimed it, and no response followed."""
    from _cli_support import AGENT, call, make_session

    from eventstore import Content, Event, Part

    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c1", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c1",), timestamp=time.time() - 3600,
              custom_metadata={"claimed_by": {"invocation_id": "inv-1", "host": "box",
                                              "pid": 42, "at": time.time() - 3600}}),
    ])
    return db


def test_rerun_refuses_a_young_claim_unless_forced(db: Path) -> None:
    from _cli_support import AGENT, call, make_session

    from eventstore import Content, Event, Part

    make_session(str(db), [
        Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c1", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c1",),
              custom_metadata={"claimed_by": {"invocation_id": "inv-7", "host": "box",
                                              "pid": 42, "at": time.time() - 4}}),
    ])
    shown = invoke("pending", "s1", "--db", str(db)).stdout
    assert "by invocation inv-7 on host box (pid 42) — it may still be running" in shown
    before = file_fingerprint(db)
    refused = invoke("rerun", "s1", "c1", "--db", str(db))
    assert refused.exit_code == 1
    assert "may still be running" in refused.stderr
    assert "--force" in refused.stderr
    assert file_fingerprint(db) == before
    assert invoke("rerun", "s1", "c1", "--db", str(db), "--min-age", "1").exit_code == 0


def test_rerun_force_decides_a_young_claim(db: Path) -> None:
    from _cli_support import AGENT, call, make_session

    from eventstore import Content, Event

    make_session(str(db), [
        Event(author=AGENT, turn_complete=True,
              content=Content(role="model", parts=(call("c1", "charge", amount=5),))),
        Event(author=AGENT, started_call_ids=("c1",)),
    ])
    assert invoke("rerun", "s1", "c1", "--db", str(db)).exit_code == 1
    forced = invoke("rerun", "s1", "c1", "--db", str(db), "--force")
    assert forced.exit_code == 0, forced.stderr


def test_pending_offers_rerun_or_respond_for_a_call_in_doubt(db: Path) -> None:
    _in_doubt_db(db)
    [item] = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json",
                                 "--idempotent", "lookup").stdout)["pending"]
    assert item["kind"] == "in_doubt"
    assert f"evs rerun --db {db} s1 c1" in item["command"]
    assert f"evs respond --db {db} s1 c1 --result" in item["command"]


def test_pending_without_tool_knowledge_says_it_depends_on_idempotency(db: Path) -> None:
    _in_doubt_db(db)
    data = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)
    [item] = data["pending"]
    assert item["kind"] == "idempotency_unknown"
    assert "unknown: depends on whether 'charge' is idempotent" in item["reason"]
    assert f"evs rerun --db {db} s1 c1" in item["command"]
    assert data["next_run"]["step"] == "unknown"
    text = invoke("pending", "s1", "--db", str(db)).stdout
    assert "unknown: depends on whether 'charge' is idempotent" in text


def test_rerun_records_the_decision(db: Path) -> None:
    _in_doubt_db(db)
    result = invoke("rerun", "s1", "c1", "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["seq"] == 4
    raw = [orjson.loads(line) for line in
           invoke("show", "s1", "--db", str(db), "--raw").stdout.splitlines() if line.strip()]
    assert raw[-1]["author"] == "user"
    assert raw[-1]["schema_version"] == 2
    assert raw[-1]["payload"] == {"m": {"rerun_call_ids": ["c1"]}}  # the stored encoding
    pending = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)["pending"]
    assert "in_doubt" not in [p["kind"] for p in pending]


def test_rerun_refuses_an_answered_call(paused_db: Path) -> None:
    before = file_fingerprint(paused_db)
    result = invoke("rerun", "s1", "c1", "--db", str(paused_db))
    assert result.exit_code == 1
    assert "already answered" in result.stderr
    assert file_fingerprint(paused_db)[0] == before[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param('{"a": 123456789012345678901234567890}',
                     "--result['a'] is the integer 123456789012345678901234567890", id="bigint"),
        pytest.param('{"a": NaN}', "--result is not valid JSON", id="nan"),
        pytest.param('{"a": -Infinity}', "--result is not valid JSON", id="inf"),
        pytest.param('{"a": ' + "[" * 980 + "]" * 980 + "}", "deeper than 200 levels",
                     id="deep-980"),
        pytest.param('{"a": ' + "[" * 1023 + "]" * 1023 + "}", "deeper than 200 levels",
                     id="deep-1023"),
        pytest.param('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "--result is not valid JSON",
                     id="deep-5000"),
        pytest.param('{"a": ' + "9" * 5000 + "}", "--result", id="huge-digits"),
    ],
)
def test_respond_refuses_values_the_log_cannot_carry(paused_db: Path, text: str,
                                                     words: str) -> None:
    before = file_fingerprint(paused_db)
    result = invoke("respond", "s1", "c4", "--result", text, "--db", str(paused_db))
    assert result.exit_code == 1
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert file_fingerprint(paused_db) == before


def test_pending_parent_lists_the_paused_childs_items_with_their_commands(db: Path) -> None:
    import asyncio

    from eventstore import FunctionCall, open_store
    from runtime import Agent, AgentTool, ModelResponse, Runner, ScriptedModel, function_tool

    @function_tool(requires_confirmation=True)
    def book(city: str) -> dict[str, str]:
        """Book.

        Args:
            city: Where.
        """
        return {"booked": city}

    async def build() -> None:
        async with await open_store(db, auto_upgrade=True) as store:
            child = Agent(name="booker", tools=[book], model=ScriptedModel([ModelResponse(
                function_calls=(FunctionCall(id="c-1", name="book", args={"city": "Kyoto"}),))]))
            parent = Agent(name="planner", tools=[AgentTool(child, store=store)],
                           model=ScriptedModel([ModelResponse(function_calls=(FunctionCall(
                               id="p-1", name="booker", args={"request": "Kyoto"}),))]))
            runner = Runner(agent=parent, store=store, app_name="trip")
            await runner.create_session(user_id="u", session_id="trip")
            await runner.run(session_id="trip", user_id="u", new_message="book")

    asyncio.run(build())
    items = orjson.loads(invoke("pending", "trip", "--db", str(db), "--json").stdout)["pending"]
    [confirm] = [i for i in items if i["kind"] == "confirmation"]
    assert confirm["session_id"] == "trip/p-1"
    assert confirm["command"].startswith(f"evs confirm --db {db} trip/p-1 confirm-")
    assert "(child session trip/p-1)" in invoke("pending", "trip", "--db", str(db)).stdout
    # evs show shows the link both ways.
    assert "↓ child session trip/p-1" in invoke("show", "trip", "--db", str(db)).stdout
    child_view = invoke("show", "trip/p-1", "--db", str(db))
    assert "Child of session trip (call p-1)" in child_view.stdout
    assert "↑ child of session trip, call p-1" in child_view.stdout
    links = orjson.loads(invoke("show", "trip", "--db", str(db), "--json").stdout)["links"]
    assert links == {"parent": None, "children": {"p-1": "trip/p-1"}, "forked_from": None,
                     "forks": []}
    # Answering through the parent's id routes the answer to the child's request.
    answered = invoke("confirm", "trip", confirm["confirmation_id"], "--yes", "--db", str(db))
    assert answered.exit_code == 0, answered.stderr
    items = orjson.loads(invoke("pending", "trip", "--db", str(db), "--json").stdout)["pending"]
    assert [i["kind"] for i in items if i["session_id"] == "trip/p-1"] == ["confirmed_not_run"]


def test_pending_uses_the_tool_knowledge_of_an_agent_an_app_registered(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    dist = tmp_path / "site" / "weather_app-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: weather-app\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[agent_eventstore.agents]\nweather = evs_weather_agents:agent\n"
    )
    (tmp_path / "site" / "evs_weather_agents.py").write_text(
        "from runtime import Agent, ScriptedModel, function_tool\n\n"
        "@function_tool(idempotent=True)\n"
        "def charge(amount: int) -> int:\n"
        '    """Charge (deduplicated by its idempotency key)."""\n'
        "    return amount\n\n"
        "agent = Agent(name='weather_agent', model=ScriptedModel([]), tools=[charge])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    _in_doubt_db(db)  # app "weather": a claimed, unanswered call of ``charge``
    data = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)
    assert [i["kind"] for i in data["pending"]] == ["will_rerun"]
    assert data["next_run"]["executes"] == ["c1"]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["confirm", "s1", "confirm-1", "--yes"], id="confirm"),
        pytest.param(["respond", "s1", "c4", "--result", "{}"], id="respond"),
        pytest.param(["rerun", "s1", "c4"], id="rerun"),
    ],
)
def test_answers_refuse_a_log_verify_flags(paused_db: Path, args: list[str]) -> None:
    import sqlite3

    with sqlite3.connect(paused_db) as conn:
        conn.execute("DELETE FROM evs_events WHERE seq = 2")
    before = file_fingerprint(paused_db)
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert "integrity problem(s) (seq 3: seq_gap: seq 2 is missing before seq 3.)" in (
        result.stderr)
    assert "appends nothing to a damaged log. See: evs verify s1" in result.stderr
    assert file_fingerprint(paused_db)[0] == before[0]


def test_pending_names_commands_not_functions(db: Path) -> None:
    _in_doubt_db(db)
    [item] = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)["pending"]
    assert "()" not in item["reason"]
    assert "evs rerun" in item["reason"]
    assert "evs respond" in item["reason"]


def test_show_finds_a_child_whose_id_is_hashed_because_it_is_long(db: Path) -> None:
    import asyncio

    from eventstore import FunctionCall, child_session_id, open_store
    from runtime import Agent, AgentTool, ModelResponse, Runner, ScriptedModel

    parent_id = "trip-" + "x" * 240
    call_id = "p-" + "y" * 40
    child_id = child_session_id(parent_id, call_id)
    assert child_id != f"{parent_id}/{call_id}"
    assert len(child_id) <= 255

    async def build() -> None:
        async with await open_store(db, auto_upgrade=True) as store:
            child = Agent(name="booker", model=ScriptedModel([ModelResponse(text="booked")]))
            parent = Agent(name="planner", tools=[AgentTool(child, store=store)],
                           model=ScriptedModel([
                               ModelResponse(function_calls=(FunctionCall(
                                   id=call_id, name="booker", args={"request": "Kyoto"}),)),
                               ModelResponse(text="done")]))
            runner = Runner(agent=parent, store=store, app_name="trip")
            await runner.create_session(user_id="u", session_id=parent_id)
            await runner.run(session_id=parent_id, user_id="u", new_message="book")

    asyncio.run(build())
    links = orjson.loads(invoke("show", parent_id, "--db", str(db), "--json").stdout)["links"]
    assert links["children"] == {call_id: child_id}
    assert f"↓ child session {child_id}" in invoke("show", parent_id, "--db", str(db)).stdout


def _paused_by_child(db: Path) -> tuple[str, ...]:
    """Session ``trip`` whose AgentTool call ``p-1`` waits for its child's confirmation; return
    the run's ``pending_call_ids``."""
    import asyncio

    from eventstore import FunctionCall, open_store
    from runtime import Agent, AgentTool, ModelResponse, Runner, ScriptedModel, function_tool

    @function_tool(requires_confirmation=True)
    def book(city: str) -> dict[str, str]:
        """Book.

        Args:
            city: Where.
        """
        return {"booked": city}

    async def build() -> tuple[str, ...]:
        async with await open_store(db, auto_upgrade=True) as store:
            child = Agent(name="booker", tools=[book], model=ScriptedModel([ModelResponse(
                function_calls=(FunctionCall(id="c-1", name="book", args={"city": "Kyoto"}),))]))
            parent = Agent(name="planner", tools=[AgentTool(child, store=store)],
                           model=ScriptedModel([ModelResponse(function_calls=(FunctionCall(
                               id="p-1", name="booker", args={"request": "Kyoto"}),))]))
            runner = Runner(agent=parent, store=store, app_name="trip")
            await runner.create_session(user_id="u", session_id="trip")
            result = await runner.run(session_id="trip", user_id="u", new_message="book")
            assert result.status == "paused_for_confirmation"
            return result.pending_call_ids

    return asyncio.run(build())


def _session_pending(db: Path, session_id: str) -> Any:
    import asyncio

    from eventstore import open_store
    from runtime import session_pending

    async def read() -> Any:
        async with await open_store(db) as store:
            return await session_pending(store, session_id)

    return asyncio.run(read())


def test_pending_and_confirm_of_a_parent_paused_by_its_child_agree_with_session_pending(
    db: Path,
) -> None:
    [cid] = _paused_by_child(db)
    report = _session_pending(db, "trip")
    shown = orjson.loads(invoke("pending", "trip", "--db", str(db), "--json").stdout)
    # The confirmation the run named, as an item like an own confirmation: tool, args, hint.
    [item] = shown["pending"]
    [expected] = report.confirmations
    assert (item["kind"], item["confirmation_id"], item["session_id"]) == (
        "confirmation", cid, "trip/p-1")
    assert (item["tool"], item["args"], item["hint"]) == (
        expected.call.name, expected.call.args, expected.hint)
    assert (item["tool"], item["args"]) == ("book", {"city": "Kyoto"})
    assert item["hint"]
    assert shown["next_run"] == {"executes": ["p-1"], "step": "waits",
                                 "reason": report.next_run.reason}
    text = invoke("pending", "trip", "--db", str(db)).stdout
    assert "confirmation (child session trip/p-1): book" in text
    assert "Next run: The next run executes p-1, then waits" in text

    answered = invoke("confirm", "trip", cid, "--yes", "--db", str(db))
    assert answered.exit_code == 0, answered.stderr
    report = _session_pending(db, "trip")
    shown = orjson.loads(invoke("pending", "trip", "--db", str(db), "--json").stdout)
    assert [(i["kind"], i["call_id"]) for i in shown["pending"]] == [("confirmed_not_run", "c-1")]
    assert [(p.kind, p.call.id) for p in report] == [("confirmed_not_run", "c-1")]
    assert shown["next_run"]["step"] == report.next_run.step == "calls_model"


def _answer_through_the_api(db: Path, session_id: str, confirmation_id: str) -> None:
    import asyncio

    from eventstore import open_store
    from runtime import answer_confirmation

    async def answer() -> None:
        async with await open_store(db) as store:
            await answer_confirmation(store, session_id=session_id,
                                      confirmation_id=confirmation_id, confirmed=True)

    asyncio.run(answer())


def test_pending_and_confirm_of_a_request_embedding_other_args_agree_with_session_pending(
    db: Path,
) -> None:
    import dataclasses

    from _cli_support import make_session, paused_weather_log

    from eventstore import Content, Part

    log = paused_weather_log()
    request = log[-1].function_calls()[0]
    embedded = {**request.args, "originalFunctionCall": {
        "id": "c3", "name": "paid_lookup", "args": {"city": "Lyon"}}}  # edited: stored is Paris
    tampered = dataclasses.replace(request, args=embedded)
    log[-1] = dataclasses.replace(log[-1], content=Content(
        role="model", parts=(Part(function_call=tampered),)))
    make_session(str(db), log)

    [asked] = [i for i in orjson.loads(invoke("pending", "s1", "--db", str(db), "--json")
                                       .stdout)["pending"] if i["kind"] == "confirmation"]
    assert "an answer to it is refused and the next run pauses" in asked["reason"]
    refused_by_cli = invoke("confirm", "s1", "confirm-1", "--yes", "--db", str(db))
    assert refused_by_cli.exit_code == 1  # evs confirm appends nothing to a damaged log
    assert "confirmation_call_mismatch" in refused_by_cli.stderr
    _answer_through_the_api(db, "s1", "confirm-1")

    report = _session_pending(db, "s1")
    shown = orjson.loads(invoke("pending", "s1", "--db", str(db), "--json").stdout)
    [refused] = [i for i in shown["pending"] if i["kind"] == "refused"]
    assert refused["confirmation_id"] == "confirm-1"
    assert "embeds paid_lookup({'city': 'Lyon'})" in refused["reason"]
    assert shown["next_run"] == {"executes": [], "step": "pauses",
                                 "reason": report.next_run.reason}
    assert report  # something waits: the next run pauses on the refusal
