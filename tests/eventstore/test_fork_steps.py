"""``StepScan``, the store's step boundaries (where a fork may start), on hand-written logs."""

from __future__ import annotations

from _evs_support import call_event, delta_event, response_event, text_event

from eventstore import Content, Event, FunctionCall, Part
from eventstore._fork import StepScan


def _rest_after_each(events: list[Event]) -> list[bool]:
    scan = StepScan()
    rest = []
    for event in events:
        scan.feed(event)
        rest.append(scan.at_rest())
    return rest


def _turn(author: str, *call_ids: str, long_running: tuple[str, ...] = ()) -> Event:
    parts = tuple(Part(function_call=FunctionCall(id=c, name="tool", args={})) for c in call_ids)
    return Event(author=author, content=Content(role="model", parts=parts),
                 long_running_tool_ids=long_running)


def test_step_scan_a_claimed_long_running_call_is_a_pause() -> None:
    assert _rest_after_each([
        text_event("go"),
        _turn("agent", "lr", long_running=("lr",)),     # not yet claimed: inside the step
        Event(author="agent", started_call_ids=("lr",)),  # claimed, waiting for its result
        delta_event({"k": 1}),
        response_event("lr", "tool"),
    ]) == [True, False, True, True, True]


def test_step_scan_a_claimed_call_without_response_is_inside_a_step() -> None:
    assert _rest_after_each([
        call_event("c1"),
        Event(author="agent", started_call_ids=("c1",)),
        response_event("c1"),
    ]) == [False, False, True]


def test_step_scan_a_newer_turn_of_the_same_author_ends_the_older_calls() -> None:
    assert _rest_after_each([
        _turn("agent", "old"),
        _turn("other", "theirs"),      # another agent's turn leaves "old" open
        _turn("agent", "new"),         # the runtime plans only the newest turn of "agent"
        response_event("new", "tool"),
        response_event("theirs", "tool"),
    ]) == [False, False, False, False, True]


def test_step_scan_open_calls_name_the_call_its_tool_and_seq() -> None:
    scan = StepScan()
    scan.feed(Event(author="agent", seq=7, content=Content(role="model", parts=(
        Part(function_call=FunctionCall(id="c9", name="pay", args={})),))))
    assert scan.open_calls() == [("c9", "pay", 7)]
