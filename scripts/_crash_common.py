"""The crash-anywhere harness: kill a framework's run at every write to the log, resume it in a
new process, and check what the log promises (``scripts/crash_anywhere.py`` drives it).

A *scenario module* (``scripts/_crash_<framework>.py``, named in ``SCENARIOS`` of
``crash_anywhere.py``) runs one agent, with a fake model and three tools, on the session the
driver names, resuming whatever that session's log already holds. It is run as a child process::

    python scripts/_crash_<framework>.py --db URL --session ID

and, from this module, it must:

- call ``install_crash_point()`` before its run (it makes the process SIGKILL itself just before
  or just after the K-th write the scenario makes to the store, counted across every process of
  one scenario run);
- call ``say_start(recorded_model_turns=R)`` once it has opened the store and before the run,
  with the number of model responses already recorded in the session's log (what a resumed run
  must not ask the model for again);
- have its fake model call ``record_model_request(turn)`` for every request it serves, ``turn``
  being the 0-based index of the model response asked for, derived from the request's contents
  (never from a counter of the process), so a repeat across processes is seen;
- have every tool call ``record_tool_run(tool, key, result)`` when its side effect happens
  (``key`` names the logical call: tool and arguments), so the driver can count runs and, for a
  call the log reports in doubt, tell whether its effect happened (what an operator would look
  up in the external system by the call's idempotency key);
- end with ``say_end(status=..., output=...)``: ``"done"`` with the final output, ``"paused"``
  when the run waits for a human (the driver then answers through ``evs pending`` / ``evs
  confirm`` in another process, as a user would) or ``"in_doubt"`` when it waits for a decision
  about a call that started and never finished (the driver then runs ``evs respond`` with the
  recorded result when the effect happened, ``evs rerun --force`` when it did not).

Every output line of the protocol is one JSON object prefixed with ``CRASH_PROTOCOL_PREFIX``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

CRASH_POINT_ENV = "EVS_CRASH_POINT"
"""``before:K`` or ``after:K``: SIGKILL this process around the scenario's K-th store write."""
WORKDIR_ENV = "EVS_CRASH_WORKDIR"
"""The folder of one scenario run: the write counter and the ledgers live there."""
CRASH_PROTOCOL_PREFIX = "@@crash "

_WRITES_FILE = "writes"
_TOOLS_FILE = "tool_runs.jsonl"
_MODEL_FILE = "model_requests.jsonl"


# --- inside a scenario's child process -------------------------------------------------------


def _workdir() -> Path:
    value = os.environ.get(WORKDIR_ENV)
    if not value:
        raise SystemExit(f"{WORKDIR_ENV} is not set: run this through scripts/crash_anywhere.py")
    return Path(value)


def _append_line(name: str, record: dict[str, Any]) -> None:
    # One short write of a whole line, flushed and fsynced: the next instant may be a SIGKILL.
    path = _workdir() / name
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _count_write() -> int:
    path = _workdir() / _WRITES_FILE
    count = int(path.read_text() or "0") + 1 if path.exists() else 1
    path.write_text(str(count))
    return count


def _kill_self() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install_crash_point() -> None:
    """Count the store writes of this scenario run and SIGKILL this process at the one the
    driver chose: ``before:K`` just before the K-th write is sent (what was done since the
    last write, a tool's effect say, is not in the log), ``after:K`` just after it committed
    (the next step has not started). Writes are ``EventStore.append`` and
    ``EventStore.create_session``, every write a run makes to a session's log."""
    from eventstore import EventStore

    point = os.environ.get(CRASH_POINT_ENV, "")
    when, _, number = point.partition(":")
    target = int(number) if number else 0
    if when not in ("", "before", "after"):
        raise SystemExit(f"{CRASH_POINT_ENV} must be before:K or after:K, not {point!r}")

    def wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            count = _count_write()
            if when == "before" and count == target:
                _kill_self()
            result = await method(*args, **kwargs)
            if when == "after" and count == target:
                _kill_self()
            return result

        return counted

    for name in ("append", "create_session"):
        setattr(EventStore, name, wrap(getattr(EventStore, name)))


def _say(record: dict[str, Any]) -> None:
    print(CRASH_PROTOCOL_PREFIX + json.dumps(record, sort_keys=True), flush=True)


def say_start(*, recorded_model_turns: int) -> None:
    """Tell the driver how many model responses the log held when this process started."""
    _append_line("starts.jsonl", {"pid": os.getpid(), "recorded_model_turns": recorded_model_turns})
    _say({"event": "start", "pid": os.getpid(), "recorded_model_turns": recorded_model_turns})


def say_end(*, status: str, output: str | None = None) -> None:
    """Tell the driver how the run ended: ``done`` (with its output), ``paused``, ``in_doubt``."""
    if status not in ("done", "paused", "in_doubt"):
        raise ValueError(f"unknown end status {status!r}")
    _say({"event": "end", "pid": os.getpid(), "status": status, "output": output})


def record_model_request(turn: int) -> None:
    """Log that the fake model served the request for model response number ``turn``."""
    _append_line(_MODEL_FILE, {"pid": os.getpid(), "turn": turn})


def record_tool_run(tool: str, key: str, result: object) -> None:
    """Log that a tool's side effect happened (once per real run of its body)."""
    _append_line(_TOOLS_FILE, {"pid": os.getpid(), "tool": tool, "key": key, "result": result})


# --- the order scenario every framework's module runs -----------------------------------------

ORDER_TOOLS = ("lookup_price", "charge_card", "ship_order")
"""The order agent's tools: ``lookup_price`` (idempotent), ``charge_card`` (not idempotent: a
second run would charge twice), ``ship_order`` (a human approves it first)."""
ORDER_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("lookup_price", {"item": "book"}),
    ("charge_card", {"amount": 12}),
    ("ship_order", {"item": "book"}),
)
"""The call the fake model asks for at each response number, while tools are left to answer."""
ORDER_PROMPT = "Buy the book and ship it."
ORDER_ANSWER = "Ordered the book for 12; receipt r-12, tracking t-book."
"""The final answer (response number ``len(ORDER_CALLS)``)."""


def lookup_price(item: str) -> dict[str, object]:
    """Look up an item's price (reading only: safe to run again)."""
    result = {"item": item, "price": 12}
    record_tool_run("lookup_price", call_key("lookup_price", {"item": item}), result)
    return result


def charge_card(amount: int) -> dict[str, object]:
    """Charge the customer's card (a second run would charge twice)."""
    result = {"charged": amount, "receipt": f"r-{amount}"}
    record_tool_run("charge_card", call_key("charge_card", {"amount": amount}), result)
    return result


def ship_order(item: str) -> dict[str, object]:
    """Ship the order (a human approves it first)."""
    result: dict[str, object] = {"shipped": item, "tracking": f"t-{item}"}
    record_tool_run("ship_order", call_key("ship_order", {"item": item}), result)
    return result


def call_key(tool: str, args: object) -> str:
    """The ledger key of a logical call: its tool and its arguments (canonical JSON)."""
    return f"{tool}:{json.dumps(args, sort_keys=True, separators=(',', ':'))}"


def scenario_options() -> argparse.Namespace:
    """A scenario module's command line: ``--db URL --session ID``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    return parser.parse_args()


# --- the driver ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    """One framework's scenario module and what the driver must know of its tools."""

    framework: str
    """The name ``--framework`` takes."""
    module: Path
    """The scenario module's file."""
    idempotent_tools: frozenset[str]
    """Tools declared idempotent: they may run again after a crash (counted, not a miss)."""


@dataclasses.dataclass(kw_only=True)
class Outcome:
    """What one scenario run (one kill at most, then resumes until done) came to."""

    output: str | None = None
    killed: bool = False
    processes: int = 0
    repeated_model_requests: int = 0
    extra_runs: dict[str, int] = dataclasses.field(default_factory=dict)
    """Runs above one per logical call, by tool."""
    decisions: list[str] = dataclasses.field(default_factory=list)
    """What the driver did between processes (confirm, respond, rerun), in order."""
    writes: int = 0
    runner_seconds: float = 0.0
    """Wall time of the scenario's runner processes, summed (the ``evs`` decisions between them
    left out): the span a random kill's moment is drawn from and counted in."""
    error: str | None = None


@dataclasses.dataclass
class _Child:
    returncode: int
    start: dict[str, Any] | None
    end: dict[str, Any] | None
    stderr: str


def _protocol_lines(stdout: str) -> Iterator[dict[str, Any]]:
    for line in stdout.splitlines():
        if line.startswith(CRASH_PROTOCOL_PREFIX):
            yield json.loads(line[len(CRASH_PROTOCOL_PREFIX) :])


def _run_child(
    scenario: Scenario,
    *,
    db: str,
    session: str,
    workdir: Path,
    crash_point: str | None,
    kill_after: float | None,
    timeout: float,
) -> _Child:
    env = _checkout_env()
    env[WORKDIR_ENV] = str(workdir)
    env.pop(CRASH_POINT_ENV, None)
    if crash_point:
        env[CRASH_POINT_ENV] = crash_point
    command = [sys.executable, str(scenario.module), "--db", db, "--session", session]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=kill_after if kill_after else timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            if kill_after is None:
                raise RuntimeError(
                    f"{scenario.framework}: the child ran past {timeout} s: {stderr[-2000:]}"
                ) from None
    starts = [r for r in _protocol_lines(stdout) if r["event"] == "start"]
    ends = [r for r in _protocol_lines(stdout) if r["event"] == "end"]
    return _Child(
        returncode=process.returncode,
        start=starts[0] if starts else None,
        end=ends[-1] if ends else None,
        stderr=stderr,
    )


def _checkout_env() -> dict[str, str]:
    """The environment of a child process: this checkout's packages come first on its path, so
    a sweep run from a checkout judges that checkout's code, not an installed copy's."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_CHECKOUT), env.get("PYTHONPATH")]))
    return env


_CHECKOUT = Path(__file__).resolve().parents[1]


def _evs(*args: str, db: str) -> Any:
    evs = Path(sys.executable).with_name("evs")
    done = subprocess.run(
        [str(evs), *args, "--db", db, "--json"], capture_output=True, text=True, check=False,
        env=_checkout_env(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"evs {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout) if done.stdout.strip() else None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _decide(session: str, *, db: str, workdir: Path, idempotent: frozenset[str]) -> list[str]:
    """Answer what the session waits for as a person with the CLI would; returns what was done."""
    idempotent_args = [arg for tool in sorted(idempotent) for arg in ("--idempotent", tool)]
    report = _evs("pending", session, *idempotent_args, db=db)
    effects = {(r["tool"], r["key"]): r["result"] for r in _read_jsonl(workdir / _TOOLS_FILE)}
    done: list[str] = []
    for item in report["pending"]:
        kind = item["kind"]
        if kind == "confirmation":
            _evs("confirm", item["session_id"], item["confirmation_id"], "--yes", db=db)
            done.append(f"confirm {item['tool']}")
        elif kind in ("in_doubt", "unknown"):
            key = call_key(item["tool"], item.get("args") or {})
            if (item["tool"], key) in effects:
                result = effects[(item["tool"], key)]
                payload = json.dumps(result if isinstance(result, dict) else {"result": result})
                _evs("respond", item["session_id"], item["call_id"], "--result", payload, db=db)
                done.append(f"respond {item['tool']} (its effect happened)")
            else:
                _evs("rerun", item["session_id"], item["call_id"], "--force", db=db)
                done.append(f"rerun {item['tool']} (its effect did not happen)")
    return done


def run_scenario(
    scenario: Scenario,
    *,
    db: str,
    workdir: Path,
    crash_point: str | None = None,
    kill_after: float | None = None,
    timeout: float = 180.0,
    max_processes: int = 12,
) -> Outcome:
    """Run one scenario on a fresh session of ``db``: the runner process that reaches
    ``crash_point`` is killed there (or the one running when ``kill_after`` seconds of runner
    processes' time have passed), then new processes resume it, answering what it waits for
    through ``evs`` between them, until it is done. One kill at most: a point or moment the run
    never reaches (a moment after its end) kills nothing."""
    workdir.mkdir(parents=True, exist_ok=True)
    session = f"crash-{uuid.uuid4().hex[:12]}"
    outcome = Outcome()
    point, delay = crash_point, kill_after
    while outcome.processes < max_processes:
        started = time.perf_counter()
        child = _run_child(
            scenario,
            db=db,
            session=session,
            workdir=workdir,
            crash_point=point,
            kill_after=delay,
            timeout=timeout,
        )
        elapsed = time.perf_counter() - started
        outcome.runner_seconds += elapsed
        outcome.processes += 1
        if child.returncode == -signal.SIGKILL and child.end is None:
            # One kill a scenario run: the point stays armed until it is reached.
            outcome.killed = True
            point, delay = None, None
            continue
        # A moment later than this process's life stays armed for the processes that resume
        # the run (a kill after an approval, say), as a write point does; one that landed in
        # this process's teardown was spent.
        if delay is not None:
            left = delay - elapsed
            delay = left if left > 0 and child.returncode != -signal.SIGKILL else None
        # A random kill may land after the run said how it ended (in a slow teardown): the run
        # was over, so its end counts; any other exit without an end is a miss.
        if child.end is None or child.returncode not in (0, -signal.SIGKILL):
            outcome.error = f"exit {child.returncode}: {child.stderr[-3000:]}"
            break
        status = child.end["status"]
        if status == "done":
            outcome.output = child.end["output"]
            break
        outcome.decisions.extend(
            _decide(session, db=db, workdir=workdir, idempotent=scenario.idempotent_tools)
        )
    else:
        outcome.error = f"not done after {max_processes} processes"
    _judge(outcome, workdir=workdir, scenario=scenario)
    return outcome


def _judge(outcome: Outcome, *, workdir: Path, scenario: Scenario) -> None:
    runs = Counter((r["tool"], r["key"]) for r in _read_jsonl(workdir / _TOOLS_FILE))
    for (tool, _key), count in runs.items():
        if count > 1:
            outcome.extra_runs[tool] = outcome.extra_runs.get(tool, 0) + count - 1
    writes = workdir / _WRITES_FILE
    outcome.writes = int(writes.read_text() or "0") if writes.exists() else 0
    # A request is a repeat when the process that served it started with that turn recorded.
    recorded_at_start = _starts_by_pid(workdir)
    outcome.repeated_model_requests = sum(
        1
        for r in _read_jsonl(workdir / _MODEL_FILE)
        if r["turn"] < recorded_at_start.get(r["pid"], 0)
    )


def _starts_by_pid(workdir: Path) -> dict[int, int]:
    path = workdir / "starts.jsonl"
    return {r["pid"]: r["recorded_model_turns"] for r in _read_jsonl(path)}


def extra_runs_that_count(outcome: Outcome, scenario: Scenario) -> int:
    """Runs above one of tools not declared idempotent (each one is a miss)."""
    return sum(n for tool, n in outcome.extra_runs.items() if tool not in scenario.idempotent_tools)


@contextlib.contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database on ``server_url``'s server for one run, dropped after it."""
    import asyncpg

    dsn = server_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    admin = dsn.rsplit("/", 1)[0] + "/postgres"
    name = f"evs_crash_{uuid.uuid4().hex[:12]}"

    async def execute(sql: str) -> None:
        conn = await asyncpg.connect(admin, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(execute(f'CREATE DATABASE "{name}"'))
    try:
        yield server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def random_points(count: int, *, seconds: float, seed: int) -> list[float]:
    """``count`` kill moments spread over ``seconds`` of runner processes' time (an
    uninterrupted run's ``Outcome.runner_seconds``), reproducible by ``seed``."""
    rng = random.Random(seed)
    return [rng.uniform(0.05, max(seconds, 0.1)) for _ in range(count)]
