"""Why a test of pydantic-ai's ``tests/test_temporal.py`` that passes on ``TemporalAgent``
fails with ``EventStoreAgent`` swapped in (``run_pydantic_ai_upstream_tests.py``), by test id.

Each entry holds what the failure must say (a regular expression searched in pytest's report of
the failure) and why that is Temporal's, not ours. Every test of the file that passes on
``TemporalAgent`` and fails on ours counts, whether or not it reached one of our agents: a test
not listed here, or listed and failing with another message, is not classified and fails the
runner. The entries have the shape of ``_pai_upstream_known.KNOWN``'s per-file tables.
Measured with pydantic-ai-slim 2.33.0 and temporalio 1.24.0
(``pai_upstream_temporal_requirements.txt``).
"""

from __future__ import annotations

import re

__all__ = ["TEMPORAL", "temporal_failure"]

_NO_ACTIVITIES = r"has no attribute 'temporal_activities'"

_WORKFLOW_CODE = (
    "the test runs the agent as Temporal workflow code: the worker first asks the wrapper for "
    "the activities to register (AgentPlugin -> temporal_activities), which ours has none of; "
    "nor could ours run there, since workflow code may do no I/O (Temporal's workflow event "
    "loop has no threads or sockets) and our wrapper is the durable part itself, writing the "
    "log from the caller's process")
_CONSTRUCTION = (
    "TemporalAgent's rules when it is made: its activities are named after the agent and each "
    "toolset's id and fixed at construction (so it needs a name, a model and toolset ids, and "
    "refuses MCP tools outside an activity); ours keys calls by session and call id, takes a "
    "model at run time, and has no activities to name")
_ATTRIBUTES = (
    "the test inspects TemporalAgent's own parts (its TemporalModel and Temporal toolset "
    "wrappers, their activity definitions and retry policies), which ours has not")
_DEPRECATED = "TemporalAgent's deprecation in favour of TemporalDurability"
_REALTIME = (
    "TemporalAgent refuses realtime sessions inside a workflow (the test pretends to be in one "
    "with a placeholder model object); ours has no workflow and hands the call to the wrapped "
    "agent, which fails on the placeholder")
_TOKEN = (
    "TemporalAgent refuses a CancellationToken, same-process state that cannot reach its "
    "workflow; ours runs in the caller's process, where the token works as on the plain agent")
_REGISTRY = (
    "TemporalAgent's models= registry (a workflow may select a model only by a registered id); "
    "engine options are dropped by the swap, and ours takes the model itself at run time")

_WORKFLOW_TESTS = (
    "test_agent_name_collision",
    "test_builtins_in_workflow_with_runtime_model_override",
    "test_capability_contributed_toolset_id_from_capability",
    "test_complex_agent_run_in_workflow",
    "test_ctx_agent_in_temporal_activity",
    "test_custom_model_settings",
    "test_deferred_capability_contributed_toolset_id_from_capability",
    "test_document_url_serialization_preserves_media_type",
    "test_durability_reprepares_reveal_history_for_different_model",
    "test_dynamic_toolset_in_workflow",
    "test_dynamic_toolset_instructions_in_workflow",
    "test_dynamic_toolset_instructions_refresh_across_steps_in_workflow",
    "test_dynamic_toolset_instructions_replay_deterministic",
    "test_dynamic_toolset_temporal_activities",
    "test_image_agent",
    "test_mcp_tools_cached_across_activities",
    "test_mcptoolset_dynamic_toolset_in_workflow",
    "test_mcptoolset_in_temporal_workflow",
    "test_multimodal_content_serialization_in_workflow",
    "test_multiple_agents",
    "test_nested_multimodal_tool_return_survives_temporal",
    "test_passing_agents_through_workflow",
    "test_passing_agents_through_workflow_without_pydantic_ai_workflow",
    "test_simple_agent_run_in_workflow",
    "test_temporal_agent_explicit_run_id",
    "test_temporal_agent_history_replays_after_migrating_to_durability",
    "test_temporal_agent_iter_in_workflow",
    "test_temporal_agent_model_selection_by_id[default_explicit]",
    "test_temporal_agent_model_selection_by_instance[default_instance]",
    "test_temporal_agent_model_selection_by_instance[registered_instance]",
    "test_temporal_agent_multi_model_selection_in_workflow",
    "test_temporal_agent_multi_model_unregistered_error",
    "test_temporal_agent_override_builtin_tools_in_workflow",
    "test_temporal_agent_override_deps_in_workflow",
    "test_temporal_agent_override_model_in_workflow",
    "test_temporal_agent_override_tools_in_workflow",
    "test_temporal_agent_override_toolsets_in_workflow",
    "test_temporal_agent_run_in_workflow_with_event_stream_handler",
    "test_temporal_agent_run_in_workflow_with_executing_toolsets",
    "test_temporal_agent_run_in_workflow_with_model",
    "test_temporal_agent_run_in_workflow_with_runtime_external_toolset",
    "test_temporal_agent_run_stream_events_in_workflow",
    "test_temporal_agent_run_stream_in_workflow",
    "test_temporal_agent_run_sync_in_workflow",
    "test_temporal_agent_sync_tool_activity_disabled",
    "test_temporal_agent_with_hitl_tool",
    "test_temporal_agent_with_model_retry",
    "test_temporal_agent_with_sync_history_processor",
    "test_temporal_agent_with_sync_instructions",
    "test_temporal_agent_with_tool_failed",
    "test_temporal_agent_with_unserializable_deps_type",
    "test_temporal_dynamic_builtin_tools_select_by_model",
    "test_temporal_mcp_get_tools_not_cached_when_disabled",
    "test_temporal_mcp_get_tools_replay_deterministic",
    "test_temporal_mcptoolset_instructions_propagate",
    "test_temporal_mcptoolset_preserves_task_routing",
    "test_temporal_model_stream_direct",
    "test_text_content_serialization_in_workflow",
    "test_tool_return_metadata_survives_temporal",
    "test_uploaded_file_serialization_preserves_media_type",
    "test_web_search_agent_run_in_workflow"
,
)

TEMPORAL: dict[str, tuple[str, str]] = {
    **{test: (_NO_ACTIVITIES, _WORKFLOW_CODE) for test in _WORKFLOW_TESTS},
    "test_agent_without_name": (r"DID NOT RAISE .*UserError", _CONSTRUCTION),
    "test_agent_without_model": (r"DID NOT RAISE .*UserError", _CONSTRUCTION),
    "test_toolset_without_id": (r"DID NOT RAISE .*UserError", _CONSTRUCTION),
    "test_temporal_agent_mcp_server_activity_disabled": (r"DID NOT RAISE .*UserError",
                                                         _CONSTRUCTION),
    "test_temporal_agent_multi_model_reserved_id": (r"DID NOT RAISE .*UserError", _REGISTRY),
    "test_temporal_agent_multi_model_outside_workflow": (r"UserError: Unknown model: secondary",
                                                         _REGISTRY),
    "test_temporal_agent_without_default_model": (
        r"UserError: `model` must either be set on the agent", _REGISTRY),
    "test_temporal_agent_construction_warns_deprecated": (r"DID NOT WARN", _DEPRECATED),
    "test_temporal_agent": (r"assert isinstance\(complex_temporal_agent\.model, TemporalModel\)",
                            _ATTRIBUTES),
    "test_temporal_model_request_activities_capture_deps_type": (
        r"assert isinstance\(model, TemporalModel\)", _ATTRIBUTES),
    "test_temporal_wrapper_visit_and_replace": (r"assert 0 >= 1", _ATTRIBUTES),
    "test_temporalize_mcptoolset_dispatches_to_temporalmcptoolset": (r"StopIteration",
                                                                    _ATTRIBUTES),
    "test_temporal_agent_retry_policy_non_retryable_errors": (
        r"has no attribute 'activity_config'", _ATTRIBUTES),
    "test_temporal_agent_custom_retry_policy_keeps_non_retryable_errors": (
        r"has no attribute '_temporal_model'", _ATTRIBUTES),
    "test_temporal_agent_realtime_session_in_workflow": (
        r"'object' object has no attribute 'partition'", _REALTIME),
    "test_temporal_agent_realtime_signaling_in_workflow": (
        r"'object' object has no attribute 'partition'", _REALTIME),
    "test_temporal_agent_rejects_cancellation_token": (r"DID NOT RAISE .*UserError", _TOKEN),
}
"""Test id (as pytest names it, without the file) -> (what its failure says, why)."""


def temporal_failure(test: str, report: str) -> str | None:
    """Why ``test`` failing with ``report`` is Temporal's; None when it is not listed, or its
    failure says something else."""
    entry = TEMPORAL.get(test)
    if entry is None or not re.search(entry[0], report):
        return None
    return entry[1]
