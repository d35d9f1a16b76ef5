"""What ``Agent(compaction=...)`` is configured with, and the summarizer hook.

Kept apart from ``runtime._compaction`` (which reads the log and the replay processors) so that
``Agent`` can name these types without importing the processors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from eventstore import Compaction, Content, Event
from runtime._exceptions import RuntimeUsageError

__all__ = ["CompactionConfig", "SummaryRequest", "Summarizer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """What a summarizer is asked to summarize: the previous summary and the events after it."""

    session_id: str
    """The session being compacted."""
    previous: Compaction | None
    """The newest compaction before this one (its summary stands for the events before
    ``events``), or ``None`` for the first."""
    events: Sequence[Event]
    """The events the new summary is made from, oldest first (after ``previous.end_seq``, up to
    the compaction's ``upto``)."""


@runtime_checkable
class Summarizer(Protocol):
    """Makes the summary a compaction records (docs/compaction.md: the summarizer hook)."""

    async def summarize(self, request: SummaryRequest) -> str | Content:
        """Return the summary: a text (sent as one ``user`` text part) or a ``Content``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionConfig:
    """When an agent compacts its session by itself (``Agent(compaction=...)``).

    After an invocation that completed (a final answer), the runner compacts the session up to
    its newest event when ``every_invocations`` invocations ran since the newest compaction, or
    when the request contents after it are estimated above ``token_budget`` tokens (4
    characters a token). The summary comes from ``summarizer`` (default: the agent's own model,
    ``ModelSummarizer``). A compaction that would cover an open item is never made (the range
    stops before the oldest one).
    """

    every_invocations: int | None = None
    """Compact after this many invocations since the newest compaction (``None``: never)."""
    token_budget: int | None = None
    """Compact when the request contents after the newest compaction pass this many estimated
    tokens (``None``: never)."""
    summarizer: Summarizer | None = None
    """Makes the summary; ``None``: the agent's model with the default instruction."""

    def __post_init__(self) -> None:
        for name in ("every_invocations", "token_budget"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                raise RuntimeUsageError(
                    f"CompactionConfig.{name} must be a positive int or None, not {value!r}.")
        if self.every_invocations is None and self.token_budget is None:
            raise RuntimeUsageError(
                "CompactionConfig needs every_invocations or token_budget (or both); with "
                "neither it would never compact.")
