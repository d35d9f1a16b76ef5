"""Why an upstream durable-execution test that passes on pydantic-ai's own wrapper fails with
``EventStoreAgent`` swapped in (``run_pydantic_ai_upstream_tests.py``), one entry per test id.

An entry holds what the failure must say (a regular expression searched in the first line of
pytest's failure message and in the test's failure report) and why that is the engine's, not
ours. A listed test failing with
any other message is not classified, so a new difference of ours in a listed test still fails
the runner. Files listed here are classified by this table only; the name patterns of
``run_pydantic_ai_durable_tests.INTERNALS`` serve the other files.
"""

from __future__ import annotations

import re

__all__ = ["KNOWN", "known_failure"]

_NO_CASSETTE = r"Can't play back this request: the cassette doesn't exist"
"""Our agent sent the model request the engine refused to send: the test has no cassette."""

_NOT_ALLOWED = r"'Model requests are not allowed, since ALLOW_MODEL_REQUESTS is False'"
"""Our agent got as far as the model request, in a test that allows none (the engine refused
the run before it)."""

_REFUSED = ("the engine refuses it inside its workflow/flow before any model request (its units "
            "must be registered when the agent is made, or the stream cannot be checkpointed); "
            "ours records it and runs it")
_REFUSED_STREAM_EVENTS = ("DBOSAgent refuses run_stream_events() everywhere (it runs inside a "
                          "DBOS workflow); ours streams the events and records the run")
_LOCAL_HANDLER = ("DBOS pickles a workflow's arguments, so a handler defined in a function is "
                  "refused; ours takes any handler (nothing crosses a process boundary)")
_BUFFERED_STREAM = ("inside the engine's workflow/flow the model request is one unit whose "
                    "stream is handed over whole (one chunk); ours streams the deltas as they come")
_STEP_LIST = "the test asserts the engine's own units (DBOS steps) of the run, which ours has not"
_TASK_TOOLS = ("the tools are Prefect tasks (@task): outside a Prefect flow each call logs to "
               "Prefect's API without a flow run id, a warning the test suite turns into an error; "
               "PrefectAgent runs them inside its flow")
_TASK_CACHE = ("Prefect's opt-in task cache (cache_policy=PrefectAgentInputs()) answers a second "
               "run with the same prompt from the first run's model response; ours records "
               "each run in its own session and asks the model again")

KNOWN: dict[str, dict[str, tuple[str, str]]] = {
    "test_dbos.py": {
        "test_dbos_agent_run_stream_in_workflow": (_NO_CASSETTE, _REFUSED),
        "test_dbos_agent_run_stream_events_in_workflow": (_NO_CASSETTE, _REFUSED),
        "test_dbos_agent_run_stream_events": (r"DID NOT RAISE .*UserError",
                                              _REFUSED_STREAM_EVENTS),
        "test_dbos_agent_run_in_workflow_with_model": (_NO_CASSETTE, _REFUSED),
        "test_dbos_agent_run_in_workflow_with_event_stream_handler": (_NO_CASSETTE,
                                                                      _LOCAL_HANDLER),
        "test_dbos_agent_run_in_workflow_rejects_runtime_mcp_toolset": (
            _NOT_ALLOWED + r" != 'MCPToolset cannot be passed", _REFUSED),
        "test_dbos_agent_run_in_workflow_rejects_runtime_dynamic_toolset": (
            _NOT_ALLOWED + r" != 'DynamicToolset cannot be passed", _REFUSED),
        "test_dbos_agent_iter_in_workflow": (r"Snapshot mismatch: \['The', 'The capital",
                                             _BUFFERED_STREAM),
        "test_complex_agent_run_sequential_tool": (r"Snapshot mismatch: \[\] != "
                                                   r"\['seq_complex_agent__", _STEP_LIST),
        "test_dbos_agent_run_in_workflow_with_runtime_event_stream_handler": (
            r"IndexError: list index out of range", _STEP_LIST),
        "test_dbos_mcp_get_tools_recorded_independently_per_run": (r"assert 0 == 1",
                                                                   _STEP_LIST),
        "test_dbos_agent_with_unserializable_deps_type": (
            r"Can't play back this request.*cannot pickle '_thread\.RLock' object",
            "DBOS pickles deps at its step boundary and refuses deps it cannot; ours keeps "
            "deps in the process (they are not part of the log) and runs on"),
    },
    "test_prefect.py": {
        "test_run_stream_in_flow": (r"DID NOT RAISE", _REFUSED),
        "test_run_stream_events_in_flow": (_NO_CASSETTE, _REFUSED),
        "test_prefect_agent_run_with_model": (_NO_CASSETTE, _REFUSED),
        "test_prefect_agent_run_rejects_executing_runtime_toolsets[function]": (
            r"DID NOT RAISE", _REFUSED),
        "test_prefect_agent_run_rejects_executing_runtime_toolsets[mcp]": (
            r"DID NOT RAISE|Tool 'get_error' exceeded max retries count of 1",
            _REFUSED + " (the test's TestModel calls every tool of the MCP server, one of "
            "which always fails, so the run ends on that tool's retries)"),
        "test_prefect_agent_run_rejects_executing_runtime_toolsets[dynamic]": (
            r"DID NOT RAISE", _REFUSED),
        "test_iter_in_flow": (r"Snapshot mismatch: \['The', 'The capital", _BUFFERED_STREAM),
        "test_dynamic_toolset": (r"Logger 'prefect\.task_runs' attempted to send logs to the "
                                 r"API without a flow run id", _TASK_TOOLS),
        "test_repeated_run_hits_cache": (r"assert 2 == 1", _TASK_CACHE),
    },
}
"""File → test id (as pytest names it, without the file) → (what its failure says, why)."""


def known_failure(nodeid: str, message: str) -> str | None:
    """Why the test ``nodeid`` failing with ``message`` is the engine's; None when it is not
    listed, or its failure says something else."""
    path, _, test = nodeid.partition("::")
    entry = KNOWN.get(path.rsplit("/", 1)[-1], {}).get(test)
    if entry is None or not re.search(entry[0], message):
        return None
    return entry[1]
