"""load_artifacts in two steps, with nothing about "what was loaded" kept outside the log.

1. ``LoadArtifactsTool.process_request`` tells the model which artifacts exist.
2. The model calls ``load_artifacts(artifact_names=[…])``; the tool answers with the names it
   found, each with the version that was the newest when the tool ran
   (``{"artifact_versions": {name: version}}``), and a message naming the missing ones. That
   response is in the log.
3. On the next request, ``LoadArtifactsProcessor`` finds that response by a backward scan
   (``LoadedArtifactsScan``, stopping at the agent's newest model turn) and appends the contents
   of exactly those versions to that request only; the contents are never copied into the log.

Because step 3 reads only the log (and versions, which are never overwritten), the request is the
same after a process restart, on a replay, and after a newer version of the artifact was saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from eventstore import ArtifactNotFoundError, ArtifactRef, Content, Event, Part
from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError, ToolContextError
from runtime._invocation import InvocationContext
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema
from runtime.tools import ModelRequest

from ._log import feed_all, is_model_turn

__all__ = [
    "LOAD_ARTIFACTS",
    "LoadArtifactsProcessor",
    "LoadArtifactsTool",
    "LoadedArtifactsScan",
    "requested_artifacts",
]

LOAD_ARTIFACTS = "load_artifacts"
"""The tool's name, as the model calls it and as its responses are found in the log."""

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/yaml")


class LoadedArtifactsScan:
    """Sans-IO: the artifact versions the agent's newest ``load_artifacts`` responses recorded.

    Fed events newest first, it looks only at events newer than the agent's newest model turn
    (the request right after the tool answered) and trusts only responses the agent appended.
    """

    def __init__(self, *, agent_name: str, tool_name: str = LOAD_ARTIFACTS) -> None:
        self._agent = agent_name
        self._tool = tool_name
        self._found: list[dict[str, int | None]] = []

    def feed(self, event: Event) -> bool:
        """Take the next older event; return True while more are needed."""
        if is_model_turn(event, self._agent):
            return False
        if event.author == self._agent:
            for response in event.function_responses():
                if response.name == self._tool:
                    recorded = _recorded_versions(response.response)
                    if recorded is not None:
                        self._found.append(recorded)
        return True

    def result(self) -> dict[str, int | None]:
        """Return name -> version to attach, oldest response first, each name once.

        The version is the one the tool recorded; ``None`` only for a response written before
        versions were recorded (then the newest version is attached).
        """
        attached: dict[str, int | None] = {}
        for batch in reversed(self._found):
            for name, version in batch.items():
                attached.setdefault(name, version)
        return attached


def _recorded_versions(response: Mapping[str, Any]) -> dict[str, int | None] | None:
    versions = response.get("artifact_versions")
    if isinstance(versions, Mapping):
        return {
            name: version
            for name, version in versions.items()
            if isinstance(name, str) and isinstance(version, int) and not isinstance(version, bool)
        }
    names = response.get("artifact_names")
    if isinstance(names, list):
        return {name: None for name in names if isinstance(name, str)}
    return None


def requested_artifacts(
    events_newest_first: Sequence[Event], *, agent_name: str
) -> dict[str, int | None]:
    """Pure form of ``LoadedArtifactsScan``: name -> version to attach to the next request."""
    scan = LoadedArtifactsScan(agent_name=agent_name)
    feed_all(scan, events_newest_first)
    return scan.result()


class LoadArtifactsTool:
    """The ``load_artifacts`` tool: lists artifacts for the model and answers its load request.

    Guarantees: the request processor lists the session's (and its user's) artifact names in an
    instruction when there are any; ``run`` answers ``{"artifact_names": [found…],
    "artifact_versions": {name: newest version when it ran}}`` plus ``missing`` and a ``message``
    naming the ones that do not exist. It reads, never writes, so it is idempotent.
    """

    idempotent = True
    """Re-running after a crash is safe: the tool only reads."""

    @property
    def name(self) -> str:
        """``load_artifacts``."""
        return LOAD_ARTIFACTS

    @property
    def description(self) -> str:
        """What the model reads."""
        return (
            "Loads the artifacts (files) named in artifact_names so that their contents are "
            "available in the next turn."
        )

    @property
    def is_long_running(self) -> bool:
        """Never: the contents arrive with the next request."""
        return False

    def declaration(self) -> FunctionDeclaration:
        """Return the declaration: one required ``artifact_names`` array of strings."""
        return declaration_from_json_schema(
            LOAD_ARTIFACTS,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {
                    "artifact_names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Names of the artifacts to load.",
                    }
                },
                "required": ["artifact_names"],
            },
        )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """Answer with the names that exist; name the missing ones in ``message``."""
        names = args.get("artifact_names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InvalidToolArgumentsError(
                LOAD_ARTIFACTS, errors=["artifact_names: must be a list of strings"]
            )
        available = await ctx.artifact_versions()
        found = {n: available[n] for n in dict.fromkeys(names) if n in available}
        missing = [n for n in dict.fromkeys(names) if n not in available]
        result: dict[str, Any] = {"artifact_names": list(found), "artifact_versions": found}
        if missing:
            result["missing"] = missing
            result["message"] = (
                f"These artifacts do not exist: {', '.join(missing)}. Available artifacts: "
                f"{', '.join(sorted(available)) or 'none'}."
            )
        return result

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Tell the model which artifacts exist and how to load them."""
        try:
            available = await ctx.list_artifacts()
        except ToolContextError:  # a context without an artifact service has nothing to list
            return
        if available:
            request.instructions.append(
                "You have a list of artifacts:\n  "
                + orjson.dumps(available).decode()
                + "\n\nWhen the user asks about any of them, call the `load_artifacts` function "
                "with their names to load them; their contents arrive in the next turn."
            )


def _describe(name: str, version: int, mime: str, data: bytes) -> tuple[Part, ...]:
    if mime.startswith(_TEXT_TYPES):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return (Part(text=f"Artifact {name} (version {version}, {mime}):\n{text}"),)
    return (
        Part(text=f"Artifact {name} (version {version}, {mime}, {len(data)} bytes) is attached."),
        Part(artifact=ArtifactRef(filename=name, version=version, mime_type=mime)),
    )


class LoadArtifactsProcessor:
    """The loop request processor of step 3: appends the requested artifacts' contents.

    Put it after the contents processor (``[*default_request_processors(),
    LoadArtifactsProcessor()]``). Guarantees: only the request right after a ``load_artifacts``
    response gets the contents, of exactly the versions that response recorded (a later save
    changes nothing); a version that cannot be loaded any more gets a sentence saying so; nothing
    is appended to the log.
    """

    def __init__(self, *, tool_name: str = LOAD_ARTIFACTS) -> None:
        self._tool = tool_name

    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        """Append one user content with the artifacts' contents, when any were requested."""
        scan = LoadedArtifactsScan(agent_name=ctx.agent.name, tool_name=self._tool)
        events = ctx.events_newest_first()
        try:
            async for event in events:
                if not scan.feed(event):
                    break
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        versions = scan.result()
        if not versions:
            return
        parts: list[Part] = []
        for name, version in versions.items():
            try:
                artifact = await ctx.store.load_artifact(ctx.session_id, name, version=version,
                                                         app_name=ctx.app_name,
                                                         user_id=ctx.user_id)
            except ArtifactNotFoundError:
                which = name if version is None else f"{name} version {version}"
                parts.append(Part(text=f"Artifact {which} could not be loaded: it does not exist."))
                continue
            parts.extend(_describe(name, artifact.version, artifact.mime_type, artifact.data))
        request.contents.append(Content(role="user", parts=tuple(parts)))
