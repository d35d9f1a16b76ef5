"""The readable text of the saver's events (``evs show``): a cheap sketch of each written value,
the node a task belongs to."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["preview", "task_node"]

_PREVIEW: Final = 120


def preview(typed: tuple[str, bytes], value: Any) -> str:
    """A short readable sketch of a written value for the event's text (``evs show``)."""
    # An encrypting serializer's type carries a suffix ("msgpack+aes"): show nothing of it.
    if "+" in typed[0]:
        return "(encrypted)"
    text = _short(value, 2)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _short(value: Any, depth: int) -> str:
    """A cheap readable sketch of a value (``repr`` of a langchain message costs more than
    the whole write): scalars as repr, the first items of containers, messages by content."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:_PREVIEW])
    if isinstance(value, list | tuple):
        if depth == 0:
            return f"[{len(value)} items]"
        inner = ", ".join(_short(v, depth - 1) for v in value[:3])
        more = ", …" if len(value) > 3 else ""
        if isinstance(value, list):
            return f"[{inner}{more}]"
        return f"({inner}{more}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        if depth == 0:
            return f"{{{len(value)} keys}}"
        items = ", ".join(f"{k!r}: {_short(v, depth - 1)}" for k, v in list(value.items())[:3])
        return f"{{{items}{', …' if len(value) > 3 else ''}}}"
    content = getattr(value, "content", None)
    if isinstance(content, str):
        return f"{type(value).__name__}({content[:_PREVIEW]!r})"
    inner_value = getattr(value, "value", None)
    if inner_value is not None and depth:
        return f"{type(value).__name__}({_short(inner_value, depth - 1)})"
    return type(value).__name__


def task_node(task_path: str) -> str:
    """``"<node> "`` for a task path that names its node, else ``""``."""
    # LangGraph's task paths start with the kind of task and the node's name.
    parts = str(task_path).split(", ")
    if len(parts) >= 2 and parts[0] in ("~__pregel_pull", "~__pregel_push"):
        return f"{parts[1]} "
    return ""
