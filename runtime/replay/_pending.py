"""What a session is waiting for, and why: a pure report computed from the log alone.

Used by the CLI (``evs pending``) and by anyone who must decide what to answer. What the next
run does is not decided here: it is the resume planner's decision (``plan_resume``) and the
head rule (``HeadScan``) — the very functions the runner calls — so the report and the runner
cannot disagree. The report adds what the planner does not act on, read from the whole history:
open and superseded confirmation requests, long-running calls of older turns, and calls no run
will execute any more.

Given the agent's tool knowledge (``idempotent_tools``) the report is exact. Without it
(``None``), a started, unanswered call of a tool that is not long-running is reported as
``idempotency_unknown``: the next run re-runs it if the tool is idempotent and pauses otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Deferrals, Event, FunctionCall

from ._log import (
    CLAIMED_BY_KEY,
    USER_AUTHOR,
    is_user_message,
    parse_confirmation_answer,
    parse_confirmation_request,
    settled_response_ids,
)
from ._resume import (
    HeadScan,
    HeadStatus,
    ResumeCall,
    ResumeDecision,
    UntrustedEvent,
    plan_resume,
    waiting_since,
)

__all__ = ["NextRun", "NextStep", "PendingCall", "PendingKind", "PendingReport", "pending"]

PendingKind = Literal[
    "not_started",
    "will_rerun",
    "confirmed_not_run",
    "rejected_not_run",
    "confirmation",
    "long_running",
    "in_doubt",
    "idempotency_unknown",
    "refused",
    "superseded",
    "abandoned",
]
"""What a pending call waits for (stable strings).

- the next run acts on it by itself: ``not_started``, ``will_rerun`` (idempotent or decided
  re-run), ``confirmed_not_run`` (it runs), ``rejected_not_run`` (it is answered with the
  rejection, the tool does not run);
- it waits for someone: ``confirmation``, ``long_running`` (a result), ``in_doubt`` (a decision),
  ``idempotency_unknown`` (the report was not told whether the tool is idempotent);
- nothing will act on it: ``refused`` (an answer the next run refuses; it pauses),
  ``superseded`` (a newer user message came before the answer was acted on), ``abandoned`` (an
  older turn's call that no run executes any more).
"""

NextStep = Literal["calls_model", "pauses", "completed", "waits", "escalated", "unknown"]
"""What the next run does after executing ``NextRun.executes`` (stable strings).

``calls_model``: it asks the model (unless a call it executes asks for a confirmation or has no
result yet); ``pauses``: it stops with status ``paused_by_planner``; ``completed``: nothing new
since the final answer; ``waits``: nothing new since the agent handed back confirmation requests
or long-running calls; ``escalated``: nothing new since a tool escalated (the run ends at once);
``unknown``: it depends on whether a tool is idempotent.
"""


def _report_group(kind: PendingKind) -> str:
    if kind in ("not_started", "will_rerun", "confirmed_not_run", "rejected_not_run"):
        return "unanswered"
    elif kind == "confirmation":
        return "confirmations"
    elif kind == "long_running":
        return "long_running"
    elif kind in ("in_doubt", "idempotency_unknown"):
        return "in_doubt"
    elif kind in ("refused", "superseded", "abandoned"):
        return "not_acted_on"
    else:  # pragma: no cover - the Literal is closed
        raise AssertionError(kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """One call the session is waiting on (or that nothing will act on, with why)."""

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
    claim: dict[str, Any] | None = None
    """For started calls: the newest claim's ``seq`` and, when recorded, its ``claimed_by``
    (invocation id, host, pid, wall-clock time)."""
    session_id: str | None = None
    """``None``: the item is the reported session's own. Else the ``AgentTool`` child session it
    lives in (``session_pending``); it is answered through the parent all the same."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NextRun:
    """What ``Runner.run(new_message=None)`` does next, from the same decision the runner makes."""

    executes: tuple[str, ...] = ()
    """Ids of the calls it claims and runs (confirmed and rejected ones included), in order."""
    step: NextStep = "calls_model"
    """What it does after that."""
    reason: str = ""
    """A sentence for humans."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingReport:
    """Everything the session is waiting on, grouped; each group in log order."""

    unanswered: tuple[PendingCall, ...] = ()
    """Calls the next run acts on by itself: never started, idempotent re-runs, re-runs a human
    allowed, and answered confirmations (run if confirmed, rejected otherwise)."""
    confirmations: tuple[PendingCall, ...] = ()
    """Open confirmation requests (with their original call)."""
    long_running: tuple[PendingCall, ...] = ()
    """Long-running calls waiting for their result (``submit_response``)."""
    in_doubt: tuple[PendingCall, ...] = ()
    """Started, unanswered calls waiting for a decision (or of unknown idempotency)."""
    not_acted_on: tuple[PendingCall, ...] = ()
    """Refused answers, superseded confirmations and abandoned calls: nothing runs them."""
    next_run: NextRun = NextRun()
    """What the next run does (the runner's own decision)."""
    untrusted: tuple[UntrustedEvent, ...] = ()
    """Events a keyed store cannot vouch for (missing or wrong signature), in log order:
    nothing is executed from them; the next run pauses when it would read one."""

    def __iter__(self) -> Iterator[PendingCall]:
        """Iterate over every reported call: the session's own ordered by ``seq``, then each
        child session's (``session_pending``), by session id, then ``seq``."""
        every = [
            *self.unanswered,
            *self.confirmations,
            *self.long_running,
            *self.in_doubt,
            *self.not_acted_on,
        ]
        return iter(sorted(every, key=lambda p: (p.session_id is not None, p.session_id or "",
                                                 p.seq or 0)))

    def __bool__(self) -> bool:
        """True when anything waits: a call the next run acts on, a call waiting for someone, or
        a next run that pauses or waits (e.g. on a refused answer, or on a request nothing can
        answer: someone must act anew)."""
        return bool(self.unanswered or self.confirmations or self.long_running or self.in_doubt
                    or self.untrusted or self.next_run.step in ("pauses", "waits"))


@dataclass(slots=True)
class _Call:
    call: FunctionCall
    agent: str
    seq: int
    long_running: bool


@dataclass(slots=True)
class _Log:
    """The whole history indexed once (oldest first)."""

    calls: dict[str, _Call]
    requests: dict[str, tuple[FunctionCall, str, int]]
    responded: dict[str, int]
    settled: dict[str, int]
    answers: dict[str, int]
    claims: dict[str, Event]
    messages: list[Event]
    agents: list[str]
    user_requests: dict[str, tuple[FunctionCall, str, int]] = dataclasses.field(
        default_factory=dict)
    """Confirmation requests a user wrote (never trusted; named when an answer is refused)."""
    deferrals: Deferrals = dataclasses.field(default_factory=Deferrals)  # long-running (§7)


def _ordered(events: Iterable[Event]) -> list[Event]:
    listed = list(events)
    if len(listed) > 1 and (listed[0].seq or 0) > (listed[-1].seq or 0):
        listed.reverse()
    return listed


def _index(log: list[Event]) -> _Log:
    out = _Log({}, {}, {}, {}, {}, {}, [], [])
    for position, event in enumerate(log, start=1):
        seq = event.seq if event.seq is not None else position
        model = event.content is not None and event.content.role == "model"
        if model and event.author != USER_AUTHOR:
            if event.author in out.agents:
                out.agents.remove(event.author)
            out.agents.append(event.author)
            for call in event.function_calls():
                if call.name == REQUEST_CONFIRMATION_FUNCTION:
                    out.requests.setdefault(call.id, (call, event.author, seq))
                else:
                    lr = call.id in event.long_running_tool_ids
                    out.calls.setdefault(call.id, _Call(call, event.author, seq, lr))
        elif model:
            for call in event.function_calls():
                if call.name == REQUEST_CONFIRMATION_FUNCTION:
                    out.user_requests.setdefault(call.id, (call, event.author, seq))
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                if not isinstance(parse_confirmation_answer(response.response), str):
                    out.answers.setdefault(response.id, seq)
            else:
                out.responded[response.id] = seq
        for call_id in settled_response_ids(event):
            out.settled[call_id] = seq
        for call_id in event.started_call_ids:
            out.claims[call_id] = event
        out.deferrals.feed(event)
        if is_user_message(event):
            out.messages.append(event)
    return out


def pending(
    events: Iterable[Event],
    *,
    idempotent_tools: Collection[str] | None = None,
    agent_name: str | None = None,
    untrusted: Mapping[int, Literal["unsigned", "bad_signature"]] | None = None,
    also_idempotent: Collection[str] = (),
) -> PendingReport:
    """Return what the session described by ``events`` is waiting on, with reasons.

    ``events`` is the whole log, oldest first (newest first is recognized by ``seq``).
    ``idempotent_tools`` names the agent's idempotent tools (the runner's knowledge); ``None``
    means unknown (see the module docstring). ``agent_name`` is the agent the next run runs
    (default: the author of the newest model turn). ``next_run`` is exactly what
    ``Runner.run(new_message=None)`` does, given the same tool knowledge. Pure: the same events
    give the same report. ``untrusted`` (seq -> problem, a keyed store's
    ``EventStore.untrusted``) names events whose signature is missing or wrong: they are
    reported in ``untrusted`` and the runner executes nothing from them. ``also_idempotent``
    names tools known to be idempotent even when ``idempotent_tools`` is ``None`` (the calls of
    an ``AgentTool``, found by their linked child session: see ``session_pending``).
    """
    log = _ordered(events)
    index = _index(log)
    agent = agent_name if agent_name is not None else (index.agents[-1] if index.agents else "")
    decision = plan_resume(
        reversed(log), agent_name=agent,
        idempotent_tools=sorted({*(idempotent_tools or ()), *also_idempotent}),
        untrusted=untrusted,
    )
    report = _Report(index, agent, decision, idempotent_tools, log).build()
    if not untrusted:
        return report
    return dataclasses.replace(report, untrusted=tuple(
        UntrustedEvent(seq=seq, problem=problem) for seq, problem in sorted(untrusted.items())))


class _Report:
    def __init__(
        self,
        index: _Log,
        agent: str,
        decision: ResumeDecision,
        idempotent: Collection[str] | None,
        log: list[Event],
    ) -> None:
        self.index, self.agent, self.decision = index, agent, decision
        self.known = idempotent is not None
        self.log = log
        self.groups: dict[str, list[PendingCall]] = {
            "unanswered": [],
            "confirmations": [],
            "long_running": [],
            "in_doubt": [],
            "not_acted_on": [],
        }
        self.covered: set[str] = set()
        # Calls covered only by items about a request (a refused answer, a superseded or open
        # request): another request for the same call is reported on its own.
        self.request_only: set[str] = set()
        self._head_scan: HeadStatus | None = None

    def add(self, kind: PendingKind, call: FunctionCall, seq: int | None, reason: str,
            **extra: Any) -> None:
        claim = self.index.claims.get(call.id)
        claim_info: dict[str, Any] | None = None
        if claim is not None and kind in ("in_doubt", "idempotency_unknown", "long_running",
                                          "will_rerun"):
            claim_info = {"seq": claim.seq, "timestamp": claim.timestamp}
            by = claim.custom_metadata.get(CLAIMED_BY_KEY)
            if isinstance(by, dict):
                claim_info["claimed_by"] = dict(by)
        agent = self.index.calls[call.id].agent if call.id in self.index.calls else self.agent
        self.groups[_report_group(kind)].append(
            PendingCall(kind=kind, call=call, agent=agent, seq=seq, reason=reason,
                        claim=claim_info, **extra)
        )
        self.covered.add(call.id)

    def seq_of(self, call: FunctionCall) -> int | None:
        known = self.index.calls.get(call.id)
        return known.seq if known is not None else None

    def build(self) -> PendingReport:
        self._decided()
        self._requests()
        self._older_calls()
        self._point_refusals_to_open_requests()
        return PendingReport(
            unanswered=tuple(self.groups["unanswered"]),
            confirmations=tuple(self.groups["confirmations"]),
            long_running=tuple(self.groups["long_running"]),
            in_doubt=tuple(self.groups["in_doubt"]),
            not_acted_on=tuple(self.groups["not_acted_on"]),
            next_run=self._next_run(),
        )

    # -- what the next run decides -------------------------------------------------------------

    def _decided(self) -> None:
        d = self.decision
        for step in d.execute:
            self._execute(step)
        for doubt in d.in_doubt:
            call = doubt.call
            claim = self.index.claims.get(call.id)
            at = f" at seq {claim.seq}" if claim is not None else ""
            if self.known:
                self.add("in_doubt", call, self.seq_of(call), doubt.reason)
            else:
                self.add(
                    "idempotency_unknown",
                    call,
                    self.seq_of(call),
                    f"Call {call.id!r} of tool {call.name!r} was started{at} but has no "
                    f"response; unknown: depends on whether {call.name!r} is idempotent — if it "
                    "is, the next run executes it again; if not, it is in doubt: decide with "
                    "rerun_call() or supply its result with submit_response().",
                )
        for call in d.waiting:
            self.add(
                "long_running",
                call,
                self.seq_of(call),
                f"Long-running call {call.id!r} of tool {call.name!r} is waiting for its "
                "result; supply it with submit_response().",
            )
        for refusal in d.refusals:
            request = (self.index.requests.get(refusal.confirmation_id)
                       or self.index.user_requests.get(refusal.confirmation_id))
            original: FunctionCall | None = None
            if refusal.function_call_id is not None:
                stored = self.index.calls.get(refusal.function_call_id)
                original = stored.call if stored is not None else None
            if original is None and request is not None:
                parsed = parse_confirmation_request(request[0])
                if not isinstance(parsed, str):
                    original = parsed[0]
            if original is None:
                original = FunctionCall(id=refusal.confirmation_id,
                                        name=REQUEST_CONFIRMATION_FUNCTION, args={})
            kind: PendingKind = "superseded" if refusal.kind == "superseded" else "refused"
            if original.id not in self.covered:
                self.request_only.add(original.id)
            self.add(
                kind,
                original,
                request[2] if request is not None else None,
                f"{refusal.reason} The next run does not act on this answer"
                + (" and pauses." if d.pause_reason is not None else "."),
                confirmation_id=refusal.confirmation_id,
            )
            self.covered.add(refusal.confirmation_id)

    def _execute(self, step: ResumeCall) -> None:
        call, reason = step.call, step.reason
        where = f"Call {call.id!r} of tool {call.name!r}"
        if step.confirmation_id is not None:
            self.covered.add(step.confirmation_id)
        if reason == "not_started":
            self.add("not_started", call, self.seq_of(call),
                     f"{where} never started; the next run executes it.")
        elif reason == "confirmed":
            self.add("confirmed_not_run", call, self.seq_of(call),
                     f"{where} was confirmed (confirmation {step.confirmation_id!r}) but not run "
                     "yet; the next run executes it.",
                     confirmation_id=step.confirmation_id)
        elif reason == "rejected":
            self.add("rejected_not_run", call, self.seq_of(call),
                     f"{where} was rejected (confirmation {step.confirmation_id!r}); the next "
                     "run answers it with the rejection and does not run the tool.",
                     confirmation_id=step.confirmation_id)
        elif reason == "idempotent_rerun":
            self.add("will_rerun", call, self.seq_of(call),
                     f"{where} of an idempotent tool was started but has no response; the next "
                     "run executes it again.")
        elif reason == "rerun_decided":
            self.add("will_rerun", call, self.seq_of(call),
                     f"{where} is in doubt and a re-run was decided; the next run executes it "
                     "again.")
        else:
            assert_never(reason)

    def _next_run(self) -> NextRun:
        d = self.decision
        executes = tuple(step.call.id for step in d.execute)
        unknown = [p for p in self.groups["in_doubt"] if p.kind == "idempotency_unknown"]
        if unknown:
            names = sorted({p.call.name for p in unknown})
            return NextRun(
                executes=executes,
                step="unknown",
                reason=f"unknown: depends on whether {', '.join(map(repr, names))} "
                "is idempotent (the next run re-runs it if it is, and pauses otherwise).",
            )
        if d.pause_reason is not None:
            return NextRun(executes=executes, step="pauses", reason=d.pause_reason)
        head = self._head()
        if executes and head.status == "paused_for_confirmation":
            return NextRun(
                executes=executes,
                step="waits",
                reason=f"The next run executes {', '.join(executes)}, then waits for "
                f"{', '.join(head.waiting)} (confirmations of the same request, not answered "
                "yet): the agent continues once every one is answered.",
            )
        if executes and head.status == "paused_long_running":
            return NextRun(
                executes=executes,
                step="waits",
                reason=f"The next run executes {', '.join(executes)}, then waits for the "
                f"result of {', '.join(head.waiting)} (long-running calls of the same turn): "
                "the agent continues once every one has its result.",
            )
        if executes:
            return NextRun(
                executes=executes,
                step="calls_model",
                reason=f"The next run executes {', '.join(executes)}, then asks the model "
                "(unless a call asks for a confirmation or has no result yet).",
            )
        if head.status == "completed":
            return NextRun(step="completed", reason="The agent gave its final answer and "
                           "nothing new arrived since; the next run ends without a model call.")
        if head.status == "escalated":
            return NextRun(step="escalated", reason=f"{head.reason} Nothing new arrived since; "
                           "the next run ends without a model call.")
        if head.status is not None:
            return NextRun(step="waits", reason=f"The next run waits for "
                           f"{', '.join(head.waiting)}; {waiting_since(head)}")
        return NextRun(step="calls_model", reason="The next run asks the model.")

    def _head(self) -> HeadStatus:
        """What the newest events wait on (``HeadScan``), read once."""
        if self._head_scan is None:
            # The head as the runner reads it: after the calls the next run executes first.
            scan = HeadScan(agent_name=self.agent,
                            runs_first=[step.call.id for step in self.decision.execute])
            for event in reversed(self.log):
                if not scan.feed(event):
                    break
            self._head_scan = scan.result()
        return self._head_scan

    # -- what the planner does not act on ----------------------------------------------------

    def _requests(self) -> None:
        ix = self.index
        for cid, (request, agent, seq) in ix.requests.items():
            if cid in self.covered or agent == USER_AUTHOR:
                continue
            parsed = parse_confirmation_request(request)
            if isinstance(parsed, str):
                continue
            embedded, asked = parsed
            if embedded.id in self.covered and embedded.id not in self.request_only:
                continue
            if embedded.id in ix.settled:
                # A call with a response never runs again, whatever asks for it, and
                # answer_confirmation refuses such a request; but one at the head still holds
                # the next run, so the report says so (a new message moves the session on).
                if cid in self._head().waiting and ix.answers.get(cid) is None:
                    self.add(
                        "refused", embedded, seq,
                        f"Agent {agent!r} asks to confirm call {embedded.id!r} of tool "
                        f"{embedded.name!r}, which already has a response: the call never runs "
                        f"again and confirmation {cid!r} cannot be answered. The next run waits "
                        "on it until a new user message supersedes it.",
                        confirmation_id=cid, hint=parsed[1].hint,
                    )
                    self.covered.add(cid)
                continue
            stored = ix.calls.get(embedded.id)
            original = stored.call if stored is not None and stored.agent == agent else embedded
            if original.id not in self.covered:
                self.request_only.add(original.id)
            answered = ix.answers.get(cid)
            newer = [m for m in ix.messages if (m.seq or 0) > seq]
            if answered is None and not newer:
                self.add(
                    "confirmation", original, seq,
                    f"Agent {agent!r} asks to confirm call {original.id!r} of tool "
                    f"{original.name!r}: answer with answer_confirmation(confirmation_id="
                    f"{cid!r}, confirmed=…)." + _embedded_problem(cid, embedded, stored, agent),
                    confirmation_id=cid, hint=asked.hint,
                )
            elif answered is None:
                m = newer[0]
                self.add(
                    "superseded", original, seq,
                    f"Confirmation {cid!r} was superseded by the user's message {m.id!r} (seq "
                    f"{m.seq}); it can no longer be answered and call {original.id!r} does not "
                    "run.",
                    confirmation_id=cid, hint=asked.hint,
                )
            else:
                self.add(
                    "superseded", original, seq,
                    f"Confirmation {cid!r} was answered at seq {answered}, but newer events "
                    "came before a run acted on the answer; call "
                    f"{original.id!r} does not run.",
                    confirmation_id=cid, hint=asked.hint,
                )
            self.covered.add(cid)

    def _point_refusals_to_open_requests(self) -> None:
        """A refused answer's item names the open request for the same call that an answer is
        accepted for (the one answer that unblocks the session), when there is one."""
        open_requests = {item.call.id: item.confirmation_id
                         for item in self.groups["confirmations"]
                         if "Beware:" not in item.reason}
        refused = self.groups["not_acted_on"]
        for position, item in enumerate(refused):
            cid = open_requests.get(item.call.id)
            if item.kind != "refused" or cid is None or cid == item.confirmation_id:
                continue
            refused[position] = dataclasses.replace(item, reason=(
                f"{item.reason} Confirmation {cid!r} asks about the same call and is open: "
                f"answering it (`answer_confirmation(confirmation_id={cid!r}, confirmed=…)`) "
                "unblocks the session."))

    def _older_calls(self) -> None:
        ix = self.index
        for entry in ix.calls.values():
            cid, name = entry.call.id, entry.call.name
            if cid in self.covered or ix.responded.get(cid, 0) > entry.seq:
                continue
            claim = ix.claims.get(cid)
            if (entry.long_running or cid in ix.deferrals) and claim is not None:
                self.add("long_running", entry.call, entry.seq,
                         f"Long-running call {cid!r} of tool {name!r} (an older turn) is "
                         "waiting for its result; supply it with submit_response().")
            elif claim is not None:
                self.add(
                    "abandoned", entry.call, entry.seq,
                    f"Call {cid!r} of tool {name!r} was started at seq {claim.seq} and never "
                    "answered, and a newer turn followed: no run executes it again. If it took "
                    "effect, record its result with submit_response().",
                )
            else:
                self.add(
                    "abandoned", entry.call, entry.seq,
                    f"Call {cid!r} of tool {name!r} was never started and a newer turn "
                    "followed: no run executes it.",
                )


def _embedded_problem(cid: str, embedded: FunctionCall, stored: _Call | None, agent: str) -> str:
    """What the next run will say about an answer to request ``cid``, when it refuses it for
    the call the request embeds (``ConfirmationScan``'s ``never_issued`` / ``mismatch``)."""
    if stored is None or stored.agent != agent:
        return (f" Beware: it names call {embedded.id!r}, which agent {agent!r} never emitted; "
                "an answer to it is refused and the next run pauses.")
    if stored.call.name != embedded.name or stored.call.args != embedded.args:
        return (f" Beware: it embeds {embedded.name}({embedded.args!r}) but call "
                f"{embedded.id!r} is stored as {stored.call.name}({stored.call.args!r}); an "
                "answer to it is refused and the next run pauses.")
    return ""
