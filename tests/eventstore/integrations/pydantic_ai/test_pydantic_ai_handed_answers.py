"""Answers a caller hands to ``EventStoreAgent`` with ``deferred_tool_results=``, as pydantic-ai's
human-in-the-loop loop does: on the session that paused, and on a new session given the paused
run's messages as ``message_history=`` (the call was asked for outside this session's log). In
both, an approved call runs once, approved, and an external result is the tool's return, as on
the plain agent; the log then holds the approval as ``evs confirm`` would have left it."""

from __future__ import annotations

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from pydantic_ai import (  # noqa: E402
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
)
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from eventstore import CallLedger, open_store  # noqa: E402
from eventstore.integrations.pydantic_ai import EventStoreAgent  # noqa: E402
from eventstore.integrations.pydantic_ai.deferred import Confirmations  # noqa: E402


def _files_agent(ran: list[str]) -> Agent[None, Any]:
    """One model turn calls ``delete_file`` (its body asks for approval) and ``create_file``
    (its body defers to the outside); the next one reports the returns."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("delete_file", {"path": ".env"}, "c-del"),
                                        ToolCallPart("create_file", {"path": "t.txt"}, "c-new")])
        return ModelResponse(parts=[TextPart(", ".join(f"{p.tool_name}={p.content}"
                                                      for p in returns))])

    agent: Agent[None, Any] = Agent(FunctionModel(model), name="files",
                                    output_type=[str, DeferredToolRequests])

    @agent.tool
    def delete_file(ctx: RunContext[None], path: str) -> bool:
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        ran.append(f"delete {path}")
        return True

    @agent.tool
    def create_file(ctx: RunContext[None], path: str) -> None:
        ran.append(f"create {path}")
        raise CallDeferred

    return agent


def _answers(paused: DeferredToolRequests) -> DeferredToolResults:
    return DeferredToolResults(approvals={c.tool_call_id: True for c in paused.approvals},
                               calls={c.tool_call_id: "made" for c in paused.calls})


async def _plain_outcome(answers: DeferredToolResults | None = None) -> tuple[Any, list[str]]:
    ran: list[str] = []
    agent = _files_agent(ran)
    history = [ModelRequest.user_text_prompt("Delete .env, create t.txt")]
    paused = await agent.run(message_history=history)
    done = await agent.run(message_history=paused.all_messages(),
                           deferred_tool_results=answers or _answers(paused.output))
    return done.output, ran


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "handed.db")
    url: str = request.getfixturevalue("empty_postgres_url")
    return url


@pytest.mark.parametrize("where", ["new session with the history", "the paused session"])
async def test_pydantic_ai_answers_handed_by_the_caller_are_honoured(store_url: str,
                                                                      where: str) -> None:
    expected, plain_ran = await _plain_outcome()
    ran: list[str] = []
    async with await open_store(store_url, auto_upgrade=True) as store:
        agent = EventStoreAgent(_files_agent(ran), store=store)
        history = [ModelRequest.user_text_prompt("Delete .env, create t.txt")]
        paused = await agent.run(message_history=history, session_id="paused")
        assert isinstance(paused.output, DeferredToolRequests)
        answers = _answers(paused.output)
        if where == "the paused session":
            session = "paused"
            done = await agent.run(deferred_tool_results=answers, session_id=session)
        else:
            session = "continued"
            done = await agent.run(message_history=paused.all_messages(),
                                   deferred_tool_results=answers, session_id=session)
        assert done.output == expected == "delete_file=True, create_file=made"
        assert ran == plain_ran == ["create t.txt", "delete .env"]
        events = (await store.get_session(session)).events
        assert Confirmations.of(events).answers == {"c-del": True}
        assert CallLedger.of(events).get("c-del").response == {"result": True}
        again = await agent.run(None, session_id=session)
        assert again.output == expected
        assert ran == plain_ran  # nothing ran again


async def test_pydantic_ai_a_handed_denial_is_not_an_approval(tmp_path: Path) -> None:
    answers = DeferredToolResults(approvals={"c-del": False}, calls={"c-new": "made"})
    expected, plain_ran = await _plain_outcome(answers)
    ran: list[str] = []
    async with await open_store(str(tmp_path / "denied.db"), auto_upgrade=True) as store:
        agent = EventStoreAgent(_files_agent(ran), store=store)
        history = [ModelRequest.user_text_prompt("Delete .env, create t.txt")]
        paused = await agent.run(message_history=history, session_id="paused")
        assert isinstance(paused.output, DeferredToolRequests)
        done = await agent.run(message_history=paused.all_messages(),
                               deferred_tool_results=answers, session_id="continued")
        assert done.output == expected
        assert ran == plain_ran == ["create t.txt"]
        events = (await store.get_session("continued")).events
        assert Confirmations.of(events).answers.get("c-del") is not True


async def test_pydantic_ai_handed_approval_of_a_requires_approval_tool(tmp_path: Path) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("ship", {"item": "book"}, "c-ship")])
        return ModelResponse(parts=[TextPart(str(returns[-1].content))])

    shipped: list[str] = []
    shop: Agent[None, Any] = Agent(FunctionModel(model), name="shop",
                                   output_type=[str, DeferredToolRequests])

    @shop.tool_plain(requires_approval=True)
    def ship(item: str) -> str:
        shipped.append(item)
        return f"shipped the {item}"

    async with await open_store(str(tmp_path / "ship.db"), auto_upgrade=True) as store:
        agent = EventStoreAgent(shop, store=store)
        history = [ModelRequest.user_text_prompt("Ship the book")]
        paused = await agent.run(message_history=history, session_id="paused")
        assert isinstance(paused.output, DeferredToolRequests)
        assert shipped == []
        done = await agent.run(message_history=paused.all_messages(),
                               deferred_tool_results=_answers(paused.output),
                               session_id="continued")
        assert done.output == "shipped the book"
        assert shipped == ["book"]
        events = (await store.get_session("continued")).events
        assert Confirmations.of(events).answers == {"c-ship": True}
