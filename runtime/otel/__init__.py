"""Live OpenTelemetry spans of runs (extra ``[otel]``): ``LiveSpans``, a runner plugin that
emits, while a run happens, the same GenAI spans ``evs export --format otlp`` makes of the
session later. See docs/otel.md."""

from ._spans import LiveSpans

__all__ = ["LiveSpans"]
