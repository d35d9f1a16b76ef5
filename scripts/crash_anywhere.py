"""Kill a framework's agent run at every step boundary (and at random moments), resume it in a
new process, and check that it ends as an uninterrupted run does with no tool run twice.

    .venv/bin/python scripts/crash_anywhere.py [--framework NAME ...] [--backend sqlite|postgres]
        [--random 50] [--quick] [--verbose]

For each framework (every scenario in ``SCENARIOS`` when ``--framework`` is omitted) and
backend (SQLite file and PostgreSQL, ``EVS_TEST_POSTGRES_URL``'s server), the driver first runs
the scenario uninterrupted (a human approves the call that needs it through ``evs confirm``)
and counts the store writes it makes: W. Then, for every k in 1..W, it runs the scenario on a
fresh database and SIGKILLs the runner process just *before* its k-th write (the step done since
the last write is not in the log: a model response received, a tool's effect), and again just
*after* it (the write committed, the next step not begun). Then ``--random`` runs each killed at
a random moment of its runner processes' time (drawn over the uninterrupted run's; the evs
decisions between processes do not count), in whichever process is running then: the first,
or one resuming after an approval or a decision. After a kill, new processes resume the
session from the log alone; between processes the driver answers what the session waits for
as a person would, from another process, with ``evs pending`` then ``evs confirm`` (a
confirmation) or, for a call in doubt (started, never answered), ``evs respond`` with the
effect's recorded result when it happened or ``evs rerun`` when it did not (an operator looks
the call up by its idempotency key).

Prints, per framework and backend: runs, kills, outputs equal to the uninterrupted run's, runs
above one of tools not declared idempotent (must be 0), model requests repeated for responses
already recorded (must be 0), and re-runs of idempotent tools (allowed, counted). Exit status 1
on any miss. The scenario modules are ``scripts/_crash_<framework>.py`` (protocol:
``_crash_common``'s docstring).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _crash_common import (
    Outcome,
    Scenario,
    extra_runs_that_count,
    postgres_database,
    random_points,
    run_scenario,
)

HERE = Path(__file__).resolve().parent
SCENARIOS: dict[str, Scenario] = {
    "adk": Scenario(
        framework="adk",
        module=HERE / "_crash_adk.py",
        idempotent_tools=frozenset({"lookup_price"}),
    ),
    "runtime": Scenario(
        framework="runtime",
        module=HERE / "_crash_runtime.py",
        idempotent_tools=frozenset({"lookup_price"}),
    ),
    "openai-agents": Scenario(
        framework="openai-agents",
        module=HERE / "_crash_openai_agents.py",
        idempotent_tools=frozenset({"lookup_price"}),
    ),
    "openai-agents-as-tool": Scenario(
        framework="openai-agents-as-tool",
        module=HERE / "_crash_openai_agents_as_tool.py",
        idempotent_tools=frozenset({"lookup_price"}),
    ),
    "pydantic-ai": Scenario(
        framework="pydantic-ai",
        module=HERE / "_crash_pydantic_ai.py",
        idempotent_tools=frozenset({"lookup_price"}),
    ),
}
"""Every scenario the driver knows, by ``--framework`` name."""
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@dataclasses.dataclass
class Tally:
    """What one framework on one backend came to."""

    runs: int = 0
    kills: int = 0
    equal: int = 0
    extra_tool_runs: int = 0
    repeated_model_requests: int = 0
    idempotent_reruns: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)

    def add(
        self,
        outcome: Outcome,
        scenario: Scenario,
        *,
        expected: str | None,
        label: str,
        verbose: bool = False,
    ) -> None:
        """Count one run; with ``verbose``, print it on stderr as it is counted."""
        if verbose:
            print(
                f"  {scenario.framework} {label}: killed={outcome.killed} "
                f"processes={outcome.processes} equal={outcome.output == expected} "
                f"extra_runs={outcome.extra_runs} "
                f"repeated_model_requests={outcome.repeated_model_requests} "
                f"error={outcome.error is not None}",
                file=sys.stderr,
                flush=True,
            )
        self.runs += 1
        self.kills += outcome.killed
        self.equal += outcome.output is not None and outcome.output == expected
        extra = extra_runs_that_count(outcome, scenario)
        self.extra_tool_runs += extra
        self.repeated_model_requests += outcome.repeated_model_requests
        self.idempotent_reruns += sum(
            n for tool, n in outcome.extra_runs.items() if tool in scenario.idempotent_tools
        )
        if outcome.error or outcome.output != expected or extra or outcome.repeated_model_requests:
            self.errors.append(
                f"{label}: output={outcome.output!r} extra_runs={outcome.extra_runs} "
                f"repeated_model_requests={outcome.repeated_model_requests} "
                f"decisions={outcome.decisions} error={outcome.error}"
            )

    @property
    def ok(self) -> bool:
        return not self.errors and self.equal == self.runs


@contextlib.contextmanager
def database(backend: str, folder: Path) -> Iterator[str]:
    """A fresh database of ``backend`` for one scenario run."""
    if backend == "sqlite":
        yield str(folder / "crash.db")
    else:
        server = os.environ.get("EVS_TEST_POSTGRES_URL", DEFAULT_POSTGRES)
        with postgres_database(server) as url:
            yield url


def sweep(
    scenario: Scenario, backend: str, *, random_runs: int, quick: bool, verbose: bool = False
) -> Tally:
    """Every kill point of one scenario on one backend, then ``random_runs`` random kills."""
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="evs-crash-") as root:
        base = Path(root)

        def one(name: str, **kill: object) -> Outcome:
            folder = base / name
            folder.mkdir()
            with database(backend, folder) as db:
                return run_scenario(scenario, db=db, workdir=folder, **kill)  # type: ignore[arg-type]

        baseline = one("baseline")
        if baseline.error or baseline.output is None:
            tally.errors.append(f"uninterrupted run failed: {baseline.error}")
            return tally
        def count(outcome: Outcome, label: str) -> None:
            tally.add(outcome, scenario, expected=baseline.output, label=label, verbose=verbose)

        count(baseline, "uninterrupted")
        writes = range(1, baseline.writes + 1)
        points = [f"{when}:{k}" for k in writes for when in ("before", "after")]
        if quick:
            points = points[:: max(1, len(points) // 6)]
        for point in points:
            outcome = one(point.replace(":", "-"), crash_point=point)
            count(outcome, point)
        delays = random_points(
            random_runs, seconds=baseline.runner_seconds, seed=index_seed(scenario)
        )
        for index, delay in enumerate(delays):
            outcome = one(f"random-{index}", kill_after=delay)
            count(outcome, f"random {delay:.2f}s")
    return tally


def index_seed(scenario: Scenario) -> int:
    """A fixed seed per framework, so a failing random run can be repeated."""
    return sum(map(ord, scenario.framework))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--backend", action="append", choices=("sqlite", "postgres"))
    parser.add_argument("--random", type=int, default=50, help="random-moment kills per backend")
    parser.add_argument("--quick", action="store_true", help="a sample of the kill points")
    parser.add_argument("--verbose", action="store_true", help="each run on stderr as it ends")
    options = parser.parse_args()
    frameworks = options.framework or sorted(SCENARIOS)
    backends = options.backend or ["sqlite", "postgres"]
    random_runs = min(options.random, 5) if options.quick else options.random
    failed = False
    header = f"{'framework':<15} {'backend':<9} {'runs':>5} {'kills':>5} {'equal':>5} "
    header += f"{'tool runs >1':>12} {'model repeats':>13} {'idempotent re-runs':>18}"
    print(header)
    for name in frameworks:
        for backend in backends:
            tally = sweep(
                SCENARIOS[name],
                backend,
                random_runs=random_runs,
                quick=options.quick,
                verbose=options.verbose,
            )
            print(
                f"{name:<15} {backend:<9} {tally.runs:>5} {tally.kills:>5} {tally.equal:>5} "
                f"{tally.extra_tool_runs:>12} {tally.repeated_model_requests:>13} "
                f"{tally.idempotent_reruns:>18}",
                flush=True,
            )
            for error in tally.errors[:10]:
                print(f"    miss: {error}")
            failed = failed or not tally.ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
