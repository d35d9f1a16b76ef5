"""Benchmark the replay processors' cost per model request against the length of the history.

    .venv/bin/python scripts/bench_replay.py [--quick]

Two sessions in one temporary SQLite file, 100 and 100,000 events of weather-agent history
(user message, model call, claim, response, answer: five events per turn), each ending with the
moment after a human confirmed a paid lookup. Per request, the processors read the log backwards
from the store (lazy pages) and decide: the resume planner (with confirmation recovery) and the
load_artifacts scan. Backward scans stop early, so the two costs must be within 1.5x of each
other; the script prints both medians and the ratio and exits 1 when the ratio is above 1.5.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    open_store,
)
from runtime.replay import LoadedArtifactsScan, ResumeScan, feed_store

AGENT = "weather_agent"
TARGET_RATIO = 1.5


def _turn(i: int) -> list[Event]:
    call = FunctionCall(id=f"call-{i}", name="get_weather", args={"city": f"City {i}"})
    return [
        Event(author="user", content=Content(role="user", parts=(Part(text=f"Weather {i}?"),))),
        Event(
            author=AGENT,
            content=Content(role="model", parts=(Part(function_call=call),)),
            turn_complete=True,
        ),
        Event(
            author=AGENT,
            started_call_ids=(call.id,),
            custom_metadata={"idempotency_keys": {call.id: f"key-{i}"}},
        ),
        Event(
            author=AGENT,
            content=Content(
                role="user",
                parts=(
                    Part(
                        function_response=FunctionResponse(
                            id=call.id,
                            name=call.name,
                            response={"temperature_c": 20 + i % 10, "condition": "sunny"},
                        )
                    ),
                ),
            ),
            actions=EventActions(state_delta={"last_city": f"City {i}"}),
        ),
        Event(
            author=AGENT,
            content=Content(role="model", parts=(Part(text=f"City {i}: sunny."),)),
            turn_complete=True,
        ),
    ]


def _confirmed_head() -> list[Event]:
    paid = FunctionCall(id="call-paid", name="paid_weather", args={"city": "Tokyo"})
    request = FunctionCall(
        id="confirm-paid",
        name=REQUEST_CONFIRMATION_FUNCTION,
        args={
            "originalFunctionCall": {"id": paid.id, "name": paid.name, "args": paid.args},
            "toolConfirmation": {"hint": "pay 1 cent?", "confirmed": False, "payload": None},
        },
    )
    answer = FunctionResponse(
        id=request.id,
        name=REQUEST_CONFIRMATION_FUNCTION,
        response={"confirmed": True, "payload": None},
    )
    return [
        Event(author="user", content=Content(role="user", parts=(Part(text="Paid Tokyo?"),))),
        Event(
            author=AGENT,
            content=Content(role="model", parts=(Part(function_call=paid),)),
            turn_complete=True,
        ),
        Event(author=AGENT, started_call_ids=(paid.id,)),
        Event(
            author=AGENT,
            content=Content(
                role="user",
                parts=(
                    Part(
                        function_response=FunctionResponse(
                            id=paid.id,
                            name=paid.name,
                            response={"error": {"kind": "confirmation_required"}},
                        )
                    ),
                ),
            ),
            actions=EventActions(
                requested_tool_confirmations={paid.id: ToolConfirmation()}, skip_summarization=True
            ),
        ),
        Event(
            author=AGENT,
            content=Content(role="model", parts=(Part(function_call=request),)),
            long_running_tool_ids=(request.id,),
        ),
        Event(author="user", content=Content(role="user", parts=(Part(function_response=answer),))),
    ]


async def _fill(store: EventStore, session_id: str, size: int) -> None:
    await store.create_session(app_name="bench", user_id="u", session_id=session_id)
    head = _confirmed_head()
    body: list[Event] = []
    i = 0
    while len(body) < size - len(head):
        body.extend(_turn(i))
        i += 1
    events = body[: size - len(head)] + head
    version = 0
    for start in range(0, len(events), 2000):
        batch = events[start : start + 2000]
        await store.append(session_id, batch, expected_version=version)
        version += len(batch)


async def _per_request(store: EventStore, session_id: str) -> None:
    planner = ResumeScan(agent_name=AGENT, idempotent_tools=("get_weather",))
    await feed_store(planner, store, session_id)
    decision = planner.result()
    assert [p.call.id for p in decision.execute] == ["call-paid"], decision
    artifacts = LoadedArtifactsScan(agent_name=AGENT)
    await feed_store(artifacts, store, session_id)
    artifacts.result()


async def _medians(store: EventStore, session_ids: list[str], repeats: int) -> list[float]:
    """Median cost per session, sampled alternately so machine noise hits both alike."""
    for session_id in session_ids:
        for _ in range(10):
            await _per_request(store, session_id)
    gc.collect()
    gc.freeze()  # the filled history is not garbage; keep the collector off it while timing
    samples: dict[str, list[float]] = {sid: [] for sid in session_ids}
    for _ in range(repeats):
        for session_id in session_ids:
            start = time.perf_counter()
            await _per_request(store, session_id)
            samples[session_id].append(time.perf_counter() - start)
    gc.unfreeze()
    return [statistics.median(samples[sid]) for sid in session_ids]


async def main(quick: bool) -> int:
    sizes = (100, 20_000 if quick else 100_000)
    repeats = 100 if quick else 300
    with tempfile.TemporaryDirectory() as tmp:
        async with await open_store(Path(tmp) / "bench.db", auto_upgrade=True) as store:
            for size in sizes:
                started = time.perf_counter()
                await _fill(store, f"s{size}", size)
                print(f"filled {size:>7,} events in {time.perf_counter() - started:.1f} s")
            medians = await _medians(store, [f"s{size}" for size in sizes], repeats)
    for size, median in zip(sizes, medians, strict=True):
        print(f"processors per request at {size:>7,} events: {median * 1e3:.3f} ms (median)")
    ratio = medians[1] / medians[0]
    print(f"ratio {sizes[1]:,} / {sizes[0]:,}: {ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20,000 events instead of 100,000")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
