"""The caller's agents and tools in what ``EventStoreRunner`` gives back.

The SDK runs durable clones of the caller's agents (``runner``); each clone, and each wrapped
tool, names the object it stands for (``public``). What the SDK's ``Runner`` would give back
names the caller's objects, so ours does too: the tools the model is given, the streamed
events, the result once the SDK is done with it (``publish``), and a ``RunState`` the caller
gave back (``continued``), which the SDK's ``Runner`` continues in place.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import Agent, RunState
from agents.exceptions import UserError
from agents.result import RunResultStreaming

__all__ = ["continued", "mark_public", "public", "public_event", "public_tools", "publish"]

_PUBLIC = "_eventstore_public"
"""Attribute of a durable clone (agent or tool) naming the caller's object it stands for."""


def public(obj: Any) -> Any:
    """The caller's agent (or tool) for ``obj``, a durable clone of it, else ``obj``: what
    results, events, tool contexts and the model see, as with the SDK's ``Runner``."""
    return getattr(obj, _PUBLIC, obj)


def public_tools(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The model's arguments with the caller's tools in place of their durable clones."""
    if "tools" in kwargs:
        kwargs["tools"] = [public(t) for t in kwargs["tools"] or ()]
    elif len(args) > 3:
        args = (*args[:3], [public(t) for t in args[3] or ()], *args[4:])
    return args


def _item_agents(item: Any) -> list[tuple[str, Any]]:
    """(attribute, durable clone) of each agent ``item`` names by a clone; none for an
    approval request (``RunState.approve`` keys it by the agent the SDK ran)."""
    from agents.items import HandoffOutputItem, RunItemBase, ToolApprovalItem

    if isinstance(item, ToolApprovalItem) or not isinstance(item, RunItemBase):
        return []
    names = ("agent", "source_agent", "target_agent") if isinstance(
        item, HandoffOutputItem) else ("agent",)
    return [(name, getattr(item, name)) for name in names
            if public(getattr(item, name)) is not getattr(item, name)]


def _public_item(item: Any) -> Any:
    """``item`` naming the caller's agents (a copy), or ``item`` itself when it names none of
    the clones."""
    changes = {name: public(agent) for name, agent in _item_agents(item)}
    return dataclasses.replace(item, **changes) if changes else item


def public_event(event: Any) -> Any:
    """A streamed event naming the caller's agents, as the SDK's ``Runner`` streams them."""
    from agents.stream_events import AgentUpdatedStreamEvent, RunItemStreamEvent

    if isinstance(event, AgentUpdatedStreamEvent) and public(event.new_agent) is not \
            event.new_agent:
        return dataclasses.replace(event, new_agent=public(event.new_agent))
    if isinstance(event, RunItemStreamEvent):
        item = _public_item(event.item)
        return event if item is event.item else dataclasses.replace(event, item=item)
    return event


def publish(result: Any) -> None:
    """Once the SDK is done with ``result``: its agents are the caller's (``last_agent``,
    ``current_agent``, the new items', set in place: the SDK tells items apart by identity),
    not the durable clones the SDK ran. ``to_state()`` still builds its ``RunState`` from what
    the SDK ran (its pending calls, approvals and tools are the clones'), so that the state
    continues the run as the SDK left it."""
    ran: list[tuple[Any, str, Any]] = [
        (item.__dict__, name, agent) for item in result.new_items
        for name, agent in _item_agents(item)]
    if isinstance(result, RunResultStreaming):
        ran.append((result.__dict__, "current_agent", result.current_agent))
    elif result.__dict__.get("_last_agent") is not None:
        ran.append((result.__dict__, "_last_agent", result.__dict__["_last_agent"]))

    def show(public_agents: bool) -> None:
        for place, name, agent in ran:
            place[name] = public(agent) if public_agents else agent

    show(True)
    to_state = result.to_state

    def ran_state() -> Any:
        show(False)
        try:
            return to_state()
        finally:
            show(True)

    result.to_state = ran_state


async def continued(given: Any, ran: Any, agent: Agent[Any]) -> None:
    """After a run continued from the caller's ``RunState`` (``given``): the SDK's ``Runner``
    continues that state in place; ours ran a copy bound to the durable clones (``ran``), so
    the caller's state takes the copy's place, bound to the caller's agents again. A state
    the SDK cannot restore from its own JSON (it refuses some finished runs') is left as the
    caller gave it: the run's record is the log, and the result says how it ended."""
    if isinstance(given, RunState) and isinstance(ran, RunState) and given is not ran:
        try:
            fresh = await RunState.from_json(agent, ran.to_json())
        except UserError:
            return
        kept = {name: getattr(given, name, None) for name in _GUARDRAIL_RESULTS}
        given.__dict__.update(fresh.__dict__)
        for name, before in kept.items():
            now = getattr(given, name, None)
            # The results the caller's state held stay the caller's objects (the copy holds
            # their deserialized twins); results the run added follow them.
            if isinstance(before, list) and isinstance(now, list) and len(now) >= len(before):
                now[:len(before)] = before


_GUARDRAIL_RESULTS = ("_input_guardrail_results", "_output_guardrail_results",
                      "_tool_input_guardrail_results", "_tool_output_guardrail_results")


def mark_public(clone: Any, original: Any) -> None:
    """Record on ``clone`` (a durable agent or tool) the caller's ``original``."""
    setattr(clone, _PUBLIC, original)
