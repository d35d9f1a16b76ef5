"""What a session is waiting for, and why: a pure report computed from the log alone.

Used by the CLI (``evs pending``) and by anyone who must decide what to answer. Unlike the resume
planner it reads the whole history, so it also reports calls left behind by older turns.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, assert_never

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Event, FunctionCall, ToolConfirmation

from ._log import USER_AUTHOR, parse_confirmation_answer, parse_confirmation_request
from ._resume import rerun_call_ids

__all__ = ["PendingCall", "PendingKind", "PendingReport", "pending"]

PendingKind = Literal[
    "not_started", "will_rerun", "confirmed_not_run", "confirmation", "long_running", "in_doubt"
]
"""What a pending call waits for (stable strings)."""


def _report_group(kind: PendingKind) -> PendingKind:
    """The ``PendingReport`` field a kind is listed in: calls the next run executes are
    ``unanswered`` (``not_started``); every other kind has its own field."""
    if kind == "not_started" or kind == "will_rerun" or kind == "confirmed_not_run":
        return "not_started"
    elif kind == "confirmation" or kind == "long_running" or kind == "in_doubt":
        return kind
    else:
        assert_never(kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """One call the session is waiting on."""

    kind: PendingKind
    """What it waits for."""
    call: FunctionCall
    """The call (for a confirmation: the original call it asks about, as stored when known)."""
    agent: str
    """The agent that emitted the call."""
    seq: int | None
    """Position of the event that emitted the call (the request, for a confirmation)."""
    reason: str
    """A full sentence for humans: why it is pending and what unblocks it."""
    confirmation_id: str | None = None
    """For confirmations: the id to answer with ``answer_confirmation``."""
    hint: str = ""
    """For confirmations: the hint shown to the human."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingReport:
    """Everything the session is waiting on, grouped; each group in log order."""

    unanswered: tuple[PendingCall, ...] = ()
    """Calls that the next run executes by itself: never started, idempotent re-runs, re-runs
    a human allowed, and answered confirmations not yet acted on."""
    confirmations: tuple[PendingCall, ...] = ()
    """Open confirmation requests (with their original call)."""
    long_running: tuple[PendingCall, ...] = ()
    """Long-running calls waiting for their result (``submit_response``)."""
    in_doubt: tuple[PendingCall, ...] = ()
    """Started, unanswered, not idempotent calls waiting for a human decision."""

    def __iter__(self) -> Iterator[PendingCall]:
        """Iterate over every pending call, ordered by ``seq``."""
        every = [*self.unanswered, *self.confirmations, *self.long_running, *self.in_doubt]
        return iter(sorted(every, key=lambda p: p.seq or 0))

    def __bool__(self) -> bool:
        """True when anything is pending."""
        return bool(self.unanswered or self.confirmations or self.long_running or self.in_doubt)


@dataclass(slots=True)
class _Call:
    call: FunctionCall
    agent: str
    seq: int
    long_running: bool


def _ordered(events: Iterable[Event]) -> list[Event]:
    listed = list(events)
    if len(listed) > 1 and (listed[0].seq or 0) > (listed[-1].seq or 0):
        listed.reverse()
    return listed


def pending(events: Iterable[Event], *, idempotent_tools: Collection[str] = ()) -> PendingReport:
    """Return what the session described by ``events`` is waiting on, with reasons.

    ``events`` is the whole log, oldest first (newest first is recognized by ``seq``).
    ``idempotent_tools`` names tools re-run automatically after a crash; without it every started
    unanswered call is reported in doubt. Pure: the same events give the same report.
    """
    calls: dict[str, _Call] = {}
    requests: dict[str, tuple[FunctionCall, str, int]] = {}
    responded: dict[str, int] = {}
    answers: dict[str, tuple[ToolConfirmation, int]] = {}
    started: dict[str, int] = {}
    decided: dict[str, int] = {}
    for position, event in enumerate(_ordered(events), start=1):
        seq = event.seq if event.seq is not None else position
        model = event.content is not None and event.content.role == "model"
        for call in event.function_calls():
            if event.author == USER_AUTHOR or not model:
                continue
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                requests.setdefault(call.id, (call, event.author, seq))
            else:
                lr = call.id in event.long_running_tool_ids
                calls.setdefault(
                    call.id, _Call(call=call, agent=event.author, seq=seq, long_running=lr)
                )
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                parsed = parse_confirmation_answer(response.response)
                if not isinstance(parsed, str):
                    answers.setdefault(response.id, (parsed, seq))
            else:
                responded[response.id] = seq
        for call_id in event.started_call_ids:
            started[call_id] = seq
        for call_id in rerun_call_ids(event):
            decided[call_id] = seq

    idempotent = frozenset(idempotent_tools)
    groups: dict[PendingKind, list[PendingCall]] = {
        "not_started": [],
        "confirmation": [],
        "long_running": [],
        "in_doubt": [],
    }

    def add(kind: PendingKind, entry: _Call, reason: str, **extra: str) -> None:
        groups[_report_group(kind)].append(
            PendingCall(
                kind=kind, call=entry.call, agent=entry.agent, seq=entry.seq, reason=reason, **extra
            )
        )

    def after_claim(
        entry: _Call, since: int, what: str, fresh: PendingKind = "not_started"
    ) -> None:
        cid, name = entry.call.id, entry.call.name
        claim = started.get(cid, 0)
        if claim <= since:
            add(fresh, entry, f"{what} never started; the next run executes it.")
        elif entry.long_running:
            add(
                "long_running",
                entry,
                f"Long-running call {cid!r} of tool {name!r} is waiting "
                "for its result; supply it with submit_response().",
            )
        elif name in idempotent:
            add(
                "will_rerun",
                entry,
                f"Call {cid!r} of idempotent tool {name!r} was started at "
                f"seq {claim} but has no response; the next run executes it again.",
            )
        elif decided.get(cid, 0) > claim:
            add(
                "will_rerun",
                entry,
                f"Call {cid!r} of tool {name!r} is in doubt and a re-run "
                f"was decided at seq {decided[cid]}; the next run executes it again.",
            )
        else:
            add(
                "in_doubt",
                entry,
                f"Call {cid!r} of tool {name!r} was started at seq {claim} "
                "but has no response, and the tool is not known to be idempotent: decide with "
                "rerun_call() or supply its result with submit_response().",
            )

    for entry in calls.values():
        if responded.get(entry.call.id, 0) <= entry.seq:
            after_claim(entry, entry.seq, f"Call {entry.call.id!r} of tool {entry.call.name!r}")
    for cid, (request, agent, seq) in requests.items():
        request_parsed = parse_confirmation_request(request)
        if isinstance(request_parsed, str):
            continue
        embedded, asked = request_parsed
        stored = calls.get(embedded.id)
        original = stored.call if stored is not None and stored.agent == agent else embedded
        entry = _Call(call=original, agent=agent, seq=seq, long_running=False)
        answer = answers.get(cid)
        if answer is None or answer[1] <= seq:
            add(
                "confirmation",
                entry,
                f"Agent {agent!r} asks to confirm call {original.id!r} "
                f"of tool {original.name!r}: answer with answer_confirmation(confirmation_id="
                f"{cid!r}, confirmed=…).",
                confirmation_id=cid,
                hint=asked.hint,
            )
        elif responded.get(original.id, 0) <= answer[1]:
            verdict = "confirmed" if answer[0].confirmed else "rejected"
            answered = _Call(call=original, agent=agent, seq=answer[1], long_running=False)
            after_claim(
                answered,
                answer[1],
                f"Call {original.id!r} of tool {original.name!r} "
                f"was {verdict} (confirmation {cid!r}) but",
                "confirmed_not_run",
            )
    return PendingReport(
        unanswered=tuple(groups["not_started"]),
        confirmations=tuple(groups["confirmation"]),
        long_running=tuple(groups["long_running"]),
        in_doubt=tuple(groups["in_doubt"]),
    )
