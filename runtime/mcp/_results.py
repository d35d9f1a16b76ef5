"""How an MCP ``CallToolResult`` becomes the function response the model receives.

Rules, in order:

- ``isError``: ``MCPToolError`` with the server's text (the pipeline answers ``execution_failed``).
- ``structuredContent`` when present: a mapping is the response as is (a ``_meta`` key dropped),
  any other value is ``{"result": value}``.
- otherwise the text parts joined by newlines: ``{"result": text}``.
- images, audio and embedded binary resources are saved as artifacts through the ``ToolContext``
  (so they are recorded in the call's ``artifact_delta``) and listed under ``"artifacts"`` as
  ``{"filename", "version", "mime_type", "kind"}``; embedded text resources are listed under
  ``"resources"`` as ``{"uri", "mime_type", "text"}``; resource links under ``"links"``.
- ``_meta`` of the result and of every part is never copied.

``plan_result`` is pure (the artifacts come back as data to save); ``map_result`` is the shell
that saves them.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from runtime._context import ToolContext
from runtime._exceptions import ToolResultError
from runtime.mcp._exceptions import MCPToolError

__all__ = ["PendingArtifact", "PlannedResult", "map_result", "plan_result"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, kw_only=True)
class PendingArtifact:
    """Binary content of a result, to be saved as an artifact."""

    filename: str
    """The artifact filename (tool, call id and position: unique per call)."""
    data: bytes
    """The decoded bytes."""
    mime_type: str
    """The content's MIME type."""
    kind: str
    """``image``, ``audio`` or ``resource``."""


@dataclass(frozen=True, kw_only=True)
class PlannedResult:
    """A result mapped without I/O: the response and the artifacts it still refers to."""

    response: dict[str, Any]
    """The response mapping, without the ``artifacts`` entry."""
    artifacts: tuple[PendingArtifact, ...]
    """Binary parts to save, in content order."""


def _extension(mime_type: str) -> str:
    guessed = mimetypes.guess_extension(mime_type.split(";")[0].strip()) or ".bin"
    return guessed


def _decode(tool_name: str, data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ToolResultError(
            f"The MCP tool {tool_name!r} returned {what} that is not valid base64: {exc}",
            tool_name=tool_name,
        ) from exc


def _text_of(content: Sequence[types.ContentBlock]) -> str:
    return "\n".join(part.text for part in content if isinstance(part, types.TextContent))


def plan_result(
    result: types.CallToolResult, *, tool_name: str, call_id: str
) -> PlannedResult:
    """Map ``result`` to a response (pure). Raises ``MCPToolError`` for an ``isError`` result and
    ``ToolResultError`` for binary content that is not valid base64."""
    if result.is_error:
        raise MCPToolError(tool_name, server_text=_text_of(result.content))
    stem = _UNSAFE.sub("_", f"{tool_name}-{call_id or 'call'}")
    artifacts: list[PendingArtifact] = []
    resources: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for index, part in enumerate(result.content):
        if isinstance(part, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(part, types.ImageContent) else "audio"
            artifacts.append(PendingArtifact(
                filename=f"{stem}-{index}{_extension(part.mime_type)}",
                data=_decode(tool_name, part.data, f"{kind} data"),
                mime_type=part.mime_type,
                kind=kind,
            ))
        elif isinstance(part, types.EmbeddedResource):
            embedded = part.resource
            mime_type = embedded.mime_type or "application/octet-stream"
            if isinstance(embedded, types.BlobResourceContents):
                artifacts.append(PendingArtifact(
                    filename=f"{stem}-{index}{_extension(mime_type)}",
                    data=_decode(tool_name, embedded.blob, f"resource {embedded.uri}"),
                    mime_type=mime_type,
                    kind="resource",
                ))
            else:
                resources.append(
                    {"uri": str(embedded.uri), "mime_type": embedded.mime_type,
                     "text": embedded.text}
                )
        elif isinstance(part, types.ResourceLink):
            links.append({"uri": str(part.uri), "name": part.name, "mime_type": part.mime_type})

    response: dict[str, Any]
    structured = result.structured_content
    if structured is not None:
        if isinstance(structured, dict):
            response = {k: v for k, v in structured.items() if k != "_meta"}
        else:
            response = {"result": structured}
    else:
        response = {"result": _text_of(result.content)}
    if resources:
        response["resources"] = resources
    if links:
        response["links"] = links
    return PlannedResult(response=response, artifacts=tuple(artifacts))


async def map_result(
    result: types.CallToolResult, *, tool_name: str, ctx: ToolContext
) -> dict[str, Any]:
    """Map ``result`` (``plan_result``) and save its binary parts as artifacts through ``ctx``.

    Each saved artifact is recorded in ``ctx.actions.artifact_delta`` and referenced in the
    response under ``"artifacts"``. Raises what ``plan_result`` raises, and ``ToolContextError``
    when binary content arrives and ``ctx`` has no artifact service.
    """
    planned = plan_result(result, tool_name=tool_name, call_id=ctx.function_call_id)
    response = dict(planned.response)
    if planned.artifacts:
        saved: list[dict[str, Any]] = []
        for artifact in planned.artifacts:
            version = await ctx.save_artifact(
                artifact.filename, artifact.data, mime_type=artifact.mime_type
            )
            saved.append({"filename": artifact.filename, "version": version,
                          "mime_type": artifact.mime_type, "kind": artifact.kind})
        response["artifacts"] = saved
    return response
