"""Compacting a session: a summary event that stands for older events in the model's requests.

``compact`` is the runtime's entry point (``evs compact`` and ``Agent(compaction=...)`` use it).
It appends one compaction event (``eventstore.Compaction``) and deletes nothing. Its rule: a
compaction never covers an *open item* — anything ``pending()`` reports (a call not started,
waiting for a confirmation or a long-running result, in doubt, answered but not run, refused,
superseded or abandoned). So every decision the replay processors make is the same with and
without the compaction, and is read from the events after it (docs/compaction.md,
docs/protocol.md §12). A compaction across an open item raises ``CompactionRefusedError`` naming
the item and the largest ``upto`` allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Compaction,
    Content,
    Event,
    EventActions,
    EventStore,
    Part,
)
from runtime._compaction_config import CompactionConfig, Summarizer, SummaryRequest
from runtime._contents import build_contents
from runtime._exceptions import CompactionRefusedError, RuntimeUsageError, SessionConflictError
from runtime._invocation import InvocationContext
from runtime._model import Model
from runtime.replay._compacted import decision_log
from runtime.replay._log import settled_response_ids
from runtime.replay._pending import pending
from runtime.tools import ModelRequest

__all__ = [
    "DEFAULT_SUMMARY_INSTRUCTION",
    "ModelSummarizer",
    "compact",
    "compact_if_due",
    "compaction_due",
    "estimated_tokens",
    "open_item_seq",
]

DEFAULT_SUMMARY_INSTRUCTION = (
    "You compact a conversation between a user and an assistant that uses tools. Write a "
    "summary that lets the assistant continue as if it had the whole conversation: the user's "
    "goals and preferences, facts learned (tool results that still matter), decisions taken and "
    "what was promised. Write it as notes, not as a reply to the user."
)
"""The instruction ``ModelSummarizer`` gives the model by default."""


class ModelSummarizer:
    """A ``Summarizer`` that asks a model: the previous summary and the range's contents (as
    ``build_contents`` would send them), then a request to summarize; the answer's text is the
    summary."""

    def __init__(self, model: Model, *, instruction: str = DEFAULT_SUMMARY_INSTRUCTION) -> None:
        self.model = model
        """The model asked for summaries."""
        self.instruction = instruction
        """Its system instruction."""

    async def summarize(self, request: SummaryRequest) -> str:
        """Return the model's summary of ``request`` (raises what the model raises, or
        RuntimeUsageError when it answers without text)."""
        contents: list[Content] = []
        if request.previous is not None:
            contents.append(request.previous.summary)
        contents += build_contents(request.events)
        contents.append(Content(role="user", parts=(Part(
            text="Summarize the conversation above for your own later use."),)))
        response = await self.model.generate(
            ModelRequest(instructions=[self.instruction], contents=contents))
        if not response.text.strip():
            raise RuntimeUsageError(
                f"The summarizer's model answered without text for session "
                f"{request.session_id!r}; nothing was compacted.")
        return response.text


def open_item_seq(events: Sequence[Event], *, agent_name: str | None = None) -> tuple[int, str]:
    """``(seq, call id)`` of the oldest open item in oldest-first ``events`` (a decision log:
    ``decision_log``), or ``(0, "")`` when nothing is open.

    Open: anything ``pending(events)`` reports, a call without a settling response (its
    ``confirmation_required`` placeholder does not settle it) and a confirmation request
    without an answer.
    """
    report = pending(events, agent_name=agent_name)
    items = [(item.seq, item.call.id) for item in report
             if item.session_id is None and item.seq is not None]
    settled: set[str] = set()
    answered: set[str] = set()
    for event in reversed(events):
        seq = event.seq or 0
        for call in event.function_calls():
            done = answered if call.name == REQUEST_CONFIRMATION_FUNCTION else settled
            if call.id not in done:
                items.append((seq, call.id))
        settled.update(settled_response_ids(event))
        answered.update(r.id for r in event.function_responses()
                        if r.name == REQUEST_CONFIRMATION_FUNCTION)
    return min(items) if items else (0, "")


async def compact(
    store: EventStore,
    session_id: str,
    *,
    upto: int | None = None,
    summary: str | Content | None = None,
    summarizer: Summarizer | None = None,
    author: str = "user",
    invocation_id: str = "",
    agent_name: str | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Event:
    """Compact ``session_id`` up to ``upto`` (default: the newest seq no open item forbids) and
    return the compaction event appended.

    ``summary`` is the text (or Content) to record; without it ``summarizer`` makes it from the
    previous summary and the events after it. Raises CompactionRefusedError when ``upto``
    would cover an open item (or when nothing can be compacted), StoreUsageError for an
    ``upto`` outside the log or not past the previous compaction, RuntimeUsageError without a
    summary or summarizer, ConcurrencyError when the session moved meanwhile; nothing is
    written then. Reads the events after the previous compaction (the whole log the first
    time). ``app_name``/``user_id`` pick the session when several apps or users hold its id
    (else AmbiguousSessionError).
    """
    if summary is None and summarizer is None:
        raise RuntimeUsageError(
            "compact() needs a summary (text or Content) or a summarizer to make one.")
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    app_name, user_id = info.app_name, info.user_id
    log, _ = await decision_log(store, session_id, agent_name=agent_name, app_name=app_name,
                                user_id=user_id)
    version = log[-1].seq if log and log[-1].seq is not None else 0
    open_seq, open_call = open_item_seq(log, agent_name=agent_name)
    allowed = open_seq - 1 if open_seq else version
    target = allowed if upto is None else upto
    if target > allowed or target < 1:
        why = (f"call {open_call!r} at seq {open_seq} is still open (see `evs pending "
               f"{session_id}`): answer it first, or compact up to seq {allowed}"
               if open_seq else f"the session has events 1..{version}")
        raise CompactionRefusedError(
            f"Session {session_id!r} cannot be compacted up to seq {target}: {why}.",
            session_id=session_id, function_call_id=open_call, seq=open_seq,
            max_upto=max(allowed, 0))
    if summary is None:
        assert summarizer is not None
        history = await store.read_compacted(session_id, upto=version, app_name=app_name,
                                             user_id=user_id)
        previous = history.summary
        start = previous.end_seq if previous is not None else 0
        covered = [e for e in history.events if start < (e.seq or 0) <= target]
        summary = await summarizer.summarize(
            SummaryRequest(session_id=session_id, previous=previous, events=tuple(covered)))
    return await store.compact(session_id, upto=target, summary=summary, author=author,
                               invocation_id=invocation_id, expected_version=version,
                               app_name=app_name, user_id=user_id)


def estimated_tokens(contents: Sequence[Content]) -> int:
    """A rough token count of ``contents`` (4 characters a token, tool JSON included)."""
    chars = 0
    for content in contents:
        for part in content.parts:
            if part.text is not None:
                chars += len(part.text)
            elif part.function_call is not None:
                chars += len(part.function_call.name) + len(repr(part.function_call.args))
            elif part.function_response is not None:
                chars += len(part.function_response.name) + len(
                    repr(part.function_response.response))
    return chars // 4


def compaction_due(
    config: CompactionConfig, events: Sequence[Event], summary: Content | None
) -> bool:
    """Whether ``config`` asks for a compaction now, given the events after the newest
    compaction (``events``) and its summary."""
    if config.every_invocations is not None:
        invocations = {e.invocation_id for e in events
                       if e.invocation_id and e.actions.compaction is None}
        if len(invocations) >= config.every_invocations:
            return True
    if config.token_budget is not None:
        contents = ([summary] if summary is not None else []) + build_contents(events)
        if estimated_tokens(contents) > config.token_budget:
            return True
    return False


async def compact_if_due(ctx: InvocationContext) -> bool:
    """Compact the session of ``ctx`` when its agent's ``CompactionConfig`` says so (called by
    the runner after a final answer); return whether a compaction event was appended.

    Best effort, as a cache would be: a range that only open items fill, or a session another
    writer moved meanwhile, leaves the session uncompacted (the next invocation tries again).
    """
    config = ctx.agent.compaction
    if config is None:
        return False
    compaction, events = await ctx.request_events()
    record = compaction.actions.compaction if compaction is not None else None
    if not compaction_due(config, events, record.summary if record is not None else None):
        return False
    log, _ = await decision_log(ctx.store, ctx.session_id, agent_name=ctx.agent.name,
                                app_name=ctx.app_name, user_id=ctx.user_id)
    open_seq, _ = open_item_seq(log, agent_name=ctx.agent.name)
    target = min(ctx.version, open_seq - 1) if open_seq else ctx.version
    previous_end = record.end_seq if record is not None else 0
    if target <= previous_end:
        return False
    summarizer = config.summarizer or ModelSummarizer(ctx.agent.model)
    made = await summarizer.summarize(SummaryRequest(
        session_id=ctx.session_id, previous=record,
        events=tuple(e for e in events if previous_end < (e.seq or 0) <= target)))
    summary = made if isinstance(made, Content) else Content(role="user", parts=(Part(text=made),))
    event = ctx.new_event(actions=EventActions(compaction=Compaction(
        start_seq=previous_end + 1, end_seq=target, summary=summary)))
    try:
        await ctx.append(event)
    except SessionConflictError:
        return False
    return True
