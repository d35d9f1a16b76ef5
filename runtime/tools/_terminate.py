"""The termination tool: the model ends the invocation by calling it with the final result.

Koog's ``__terminate__``: a reserved tool name whose call means "I am done, here is the answer".
The call runs through the normal pipeline (claim, response event), answers
``{"result": <the argument>}`` and sets skip-summarization, so the loop appends the argument as
the final text (a model event) and makes no further model call. Bad arguments (no ``result``) are
an ``invalid_arguments`` error response like any tool's, and the loop goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from runtime._context import ToolContext
from runtime._exceptions import InvalidToolArgumentsError
from runtime.declarations import FunctionDeclaration, declaration_from_json_schema

__all__ = ["TERMINATE_ARGUMENT", "TERMINATE_TOOL_NAME", "TerminationTool"]

TERMINATE_TOOL_NAME = "__terminate__"
"""The reserved name of the termination tool (stored in the log; never rename it)."""
TERMINATE_ARGUMENT = "result"
"""The termination tool's one argument: the invocation's final result."""


class TerminationTool:
    """A tool the model calls to end the invocation with its ``result`` argument as the answer.

    Guarantees: its response is ``{"result": <argument>}`` and sets skip-summarization, so the
    loop appends the result as the final text (``display_result``: a string as is, anything else
    as compact JSON) and calls the model no more in this invocation. Raises
    ``InvalidToolArgumentsError`` (an error response for the model) when ``result`` is missing.
    """

    idempotent = True
    """Running it twice gives the same answer and has no side effect."""

    def __init__(
        self,
        *,
        description: str | None = None,
        result_schema: Mapping[str, Any] | None = None,
    ) -> None:
        self._description = description or (
            "Call this when the task is complete, with the final answer as `result`; nothing "
            "runs after it."
        )
        self._result_schema = dict(
            result_schema
            if result_schema is not None
            else {"type": "string", "description": "The final answer."}
        )

    @property
    def name(self) -> str:
        """``__terminate__``."""
        return TERMINATE_TOOL_NAME

    @property
    def description(self) -> str:
        """What the model reads."""
        return self._description

    @property
    def is_long_running(self) -> bool:
        """No."""
        return False

    def declaration(self) -> FunctionDeclaration:
        """One required parameter, ``result`` (a string unless ``result_schema`` says otherwise)."""
        return declaration_from_json_schema(
            TERMINATE_TOOL_NAME,
            description=self._description,
            parameters={
                "type": "object",
                "properties": {TERMINATE_ARGUMENT: self._result_schema},
                "required": [TERMINATE_ARGUMENT],
            },
        )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        """Answer ``{"result": args["result"]}`` and ask the loop to stop after this step."""
        if TERMINATE_ARGUMENT not in args:
            raise InvalidToolArgumentsError(
                TERMINATE_TOOL_NAME, errors=[f"{TERMINATE_ARGUMENT}: Field required"]
            )
        ctx.actions.skip_summarization = True
        return {TERMINATE_ARGUMENT: args[TERMINATE_ARGUMENT]}

    def display_result(self, result: Mapping[str, Any]) -> str | None:
        """The final text: the result itself when it is a string, else its compact JSON."""
        value = result.get(TERMINATE_ARGUMENT)
        if isinstance(value, str):
            return value
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()

    def __repr__(self) -> str:
        return "TerminationTool()"
