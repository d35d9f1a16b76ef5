"""Run the scenarios of pydantic-ai's durable-execution tests against ``EventStoreAgent`` (see
``docs/frameworks.md``)::

    .venv/bin/python scripts/run_pydantic_ai_durable_tests.py /path/to/pydantic-ai \
        [--backend sqlite|postgres] [-k SUBSTRING] [--list]

The argument is a copy of pydantic/pydantic-ai (only its ``tests/test_dbos.py``,
``test_temporal.py`` and ``test_prefect.py`` are read, for their test names; keep it outside
this project and never commit it). Those tests run each agent inside a workflow engine through
recorded OpenAI cassettes; their scenarios — the complex agent (deps, function toolset, MCP
server, external toolset, structured output, streamed events), run / run_sync / run_stream /
run_stream_events / iter, runtime event-stream handlers and toolsets, human-in-the-loop deferred
tools, model retries, failed tools, model settings, dynamic toolsets — are re-expressed in
``scripts/_pai_scenarios.py`` with ``FunctionModel`` answers, the wrapper swapped for
``EventStoreAgent``. Every upstream test is then one of:

- *ran*: its scenario ran on the backend (passed or failed, printed);
- *internals*: it tests the other system itself (its workflow/step/activity/task machinery,
  registration, replay tables, logfire spans, serialization at its boundary, its deprecation of
  ``DBOSAgent``): listed with the reason (``INTERNALS``);
- *not expressed*: a scenario not written here yet (listed, counted; none of these is claimed).

Exit status 1 when a scenario fails.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _pai_scenarios import SCENARIOS, Scenario

FILES = ("test_dbos.py", "test_temporal.py", "test_prefect.py")
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"

INTERNALS: tuple[tuple[str, str], ...] = (
    (r"realtime", "realtime sessions: signalling through the engine's workflow/step context"),
    (r"enqueue|cancel|cancellation|timeout", "the engine's enqueue/cancel rules for its units"),
    (r"legacy|deprecat|_durability_|durability", "the engine's capability API and migration off "
     "its wrapper (DBOSDurability / TemporalDurability / PrefectDurability)"),
    (r"step|activit|worker|workflow_id|workflow_name|task_|_task|cache_polic|flow_run|"
     r"sandbox|payload|converter|serializ|pickle|register|queue",
     "the engine's units (steps, activities, tasks), their registration, caching, names and "
     "the serialization at their boundary"),
    (r"dbosify|temporalize|prefectify|mcptoolset|mcp_toolset|mcp_get_tools|mcp_tool|mcp_model|"
     r"instructions", "the engine's own MCP/toolset wrapper classes and their cached listings"),
    (r"name_collision|without_name|without_model|without_id|toolset_id|colliding|unique",
     "the engine's naming rules: its units are keyed by agent and toolset names (ours by "
     "session and call id; a model may be given at run time)"),
    (r"logfire|span|otel|instrument|trace", "the engine's logfire spans"),
    (r"override", "overriding inside a workflow (ours: override the wrapped agent)"),
    (r"explicit_run_id|run_id|conversation_id", "ids derived from the workflow run"),
    (r"model_stream_direct|direct", "calling the engine's model wrapper outside an agent"),
    (r"parallel|sequential_mode|execution_mode", "the engine's tool-parallelism setting"),
    (r"event_stream_handler_property|fires_event_stream_handler|handler_in",
     "where the engine calls the handler (workflow vs step)"),
    (r"sync.*loop|loop|from_sync_tool", "the engine's event-loop handling"),
    (r"^test_(dbos|temporal|prefect)_agent$|visit_and_replace|extension_surface|"
     r"unwrap_recorded|requires_name|requires_model|rejects_",
     "the engine wrapper's own attributes and the toolsets it refuses inside a workflow"),
    (r"run_context", "RunContext serialization across the engine's process boundary"),
    (r"multi_model|model_selection|reserved_id|default_model|model_profile|base_url|"
     r"model_id_follows|model_request|runtime_provider|builtin_tools_select",
     "Temporal's registry of models an activity may select"),
    (r"plugin|heartbeat|retry_policy|non_retryable|passing_agents|through_workflow",
     "the engine's retry policies, plugins and heartbeats"),
    (r"cache|repeated_run|differing_in_metadata|disabled_tool|outside_flow",
     "Prefect's task cache keys"),
)


def upstream_tests(checkout: Path) -> list[str]:
    """Every test of the three files, as ``file::name``."""
    names: list[str] = []
    for file in FILES:
        text = (checkout / "tests" / file).read_text()
        names += [f"{file}::{m}" for m in re.findall(r"^(?:async )?def (test_\w+)", text, re.M)]
    return names


def classify(test: str) -> tuple[str, str]:
    """``("ran", "")``, ``("internals", why)`` or ``("not expressed", "")``."""
    if test in SCENARIOS:
        return "ran", ""
    name = test.split("::", 1)[1]
    for pattern, why in INTERNALS:
        if re.search(pattern, name):
            return "internals", why
    return "not expressed", ""


async def run_one(scenario: Scenario, *, url: str) -> str | None:
    """Run one scenario on a store at ``url``; the failure's text, or None."""
    from eventstore import open_store
    from eventstore.integrations.pydantic_ai import EventStoreAgent

    async with await open_store(url, auto_upgrade=True) as store:
        made: list[EventStoreAgent] = []

        def wrap(agent: Any) -> EventStoreAgent:
            wrapped = EventStoreAgent(agent, store=store, app_name=f"up-{uuid.uuid4().hex[:6]}")
            made.append(wrapped)
            return wrapped

        try:
            await asyncio.wait_for(scenario(wrap), timeout=120)
        except Exception:
            return traceback.format_exc(limit=6)
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("-k", default="")
    parser.add_argument("--list", action="store_true", help="list the classification only")
    options = parser.parse_args()
    tests = [t for t in upstream_tests(options.checkout) if options.k in t]
    counts: Counter[tuple[str, str]] = Counter()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for test in tests:
            kind, why = classify(test)
            file = test.split("::")[0]
            if kind != "ran" or options.list:
                counts[(file, kind)] += 1
                print(f"{kind:14} {test}" + (f"  ({why})" if why else ""))
                continue
            if options.backend == "sqlite":
                url = str(Path(tmp) / f"{uuid.uuid4().hex[:8]}.db")
                failure = asyncio.run(run_one(SCENARIOS[test], url=url))
            else:
                from _crash_common import postgres_database

                with postgres_database(options.postgres) as url:
                    failure = asyncio.run(run_one(SCENARIOS[test], url=url))
            status = "passed" if failure is None else "FAILED"
            failures += failure is not None
            counts[(file, status)] += 1
            print(f"{status:14} {test}")
            if failure:
                print("    " + failure.replace("\n", "\n    "))
    print()
    print(f"backend {options.backend}:")
    for file in FILES:
        row = {k: counts[(file, k)] for k in ("passed", "FAILED", "internals", "not expressed")}
        print(f"  {file:18} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    return 1 if failures else 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.1f} s)")
    sys.exit(code)
