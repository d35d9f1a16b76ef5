"""Peak memory and time of ``evs`` on big logs: does a command's cost grow with the log?

    .venv/bin/python scripts/bench_biglog.py [--sizes 10000,100000,1000000]

For each size a SQLite file holds one session of that many realistic agent events
(``_bench_events``). Each command then runs in its own process, and the process's peak RSS
(``wait4``'s ``ru_maxrss``) and wall time are printed side by side with two baselines measured
in the same run: the same process doing nothing but opening the store (``evs sessions``: the
interpreter and imports), and ``cp`` of the export file (what reading the JSONL costs). What a
flat command looks like: the same peak at every size. Commands: ``export`` (to a file),
``import`` of that export (into a new SQLite file), ``verify SESSION``, ``show SESSION --last
20``, ``state SESSION``. ``--rounds N`` runs the commands N times, alternating, and prints the
median (and the spread, max - min, of the times).

Nothing here is judged: it prints the growth so that a regression (a command that loads the
whole log) shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EVS = [sys.executable, "-m", "runtime.cli"]
SESSION = "big"
BATCH = 500
CP = shutil.which("cp") or "/bin/cp"


async def build(path: Path, size: int) -> None:
    """One session of ``size`` realistic events, appended in batches (run in a child
    process: see ``measure``)."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "scripts"))
    from _bench_events import realistic_event

    from eventstore import open_store

    async with await open_store(str(path), auto_upgrade=True) as store:
        await store.create_session(app_name="bench", user_id="u", session_id=SESSION)
        version = 0
        for start in range(0, size, BATCH):
            batch = [realistic_event(i) for i in range(start, min(size, start + BATCH))]
            await store.append(SESSION, batch, expected_version=version)
            version += len(batch)


def measure(args: list[str], *, cwd: Path = REPO) -> tuple[float, float]:
    """Run ``evs args`` (or, when ``args[0]`` is an absolute path, that program) alone in a
    child process started in ``cwd`` (``python -m`` imports the code there); return (its peak
    RSS in MiB, seconds). Output is discarded. A child's ``ru_maxrss`` starts at its parent's
    RSS on Linux, so this process stays small: it imports no eventstore and builds the logs
    in children."""
    argv = args if args[0].startswith("/") else [*EVS, *args]
    started = time.perf_counter()
    pid = _spawn_in(cwd, argv)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed with status {status}")
    return usage.ru_maxrss / 1024, elapsed


def _spawn_in(cwd: Path, argv: list[str]) -> int:
    here = Path.cwd()
    os.chdir(cwd)
    try:
        return os.posix_spawn(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        ])
    finally:
        os.chdir(here)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--build":
        asyncio.run(build(Path(sys.argv[2]), int(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated session sizes (default 10000,100000)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times each command runs, alternating (default 1)")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated command names to run (default: all), e.g. "
                        "'export -o FILE,baseline (cp FILE),import,verify SESSION'")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR",
                        help="a checkout of older code (git archive REV | tar -x -C DIR): its "
                        "import runs on the same file too, as 'import (before)'")
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows: list[tuple[int, str, float, float]] = []
        for size in sizes:
            db = Path(tmp) / f"big-{size}.db"
            started = time.perf_counter()
            measure([sys.executable, str(Path(__file__).resolve()), "--build", str(db),
                     str(size)])
            built = time.perf_counter() - started
            mib = db.stat().st_size / (1 << 20)
            print(f"{size:>9,} events: built in {built:6.1f} s, {mib:7.1f} MiB "
                  f"({db.stat().st_size / size:5.0f} bytes/event)", flush=True)
            export = Path(tmp) / f"big-{size}.jsonl"
            copied = Path(tmp) / f"copy-{size}.jsonl"
            imported = Path(tmp) / f"in-{size}.db"
            commands = {
                "baseline (sessions)": ["sessions", "--db", str(db)],
                "export -o FILE": ["export", SESSION, "--db", str(db), "-o", str(export)],
                "baseline (cp FILE)": [CP, str(export), str(copied)],
                "import": ["import", str(export), "--db", str(imported),
                           "--session-id", "copy"],
                **({"import (before)": ["import", str(export), "--db", str(imported),
                                        "--session-id", "copy"]}
                   if options.before is not None else {}),
                "verify SESSION": ["verify", SESSION, "--db", str(db)],
                "show --last 20": ["show", SESSION, "--db", str(db), "--last", "20"],
                "state": ["state", SESSION, "--db", str(db)],
            }
            if options.only is not None:
                wanted = set(options.only.split(","))
                # export makes the file the others read: it always runs
                commands = {n: a for n, a in commands.items()
                            if n in wanted or n.startswith(("export", "baseline (sessions)"))}
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(options.rounds):
                for name, args in commands.items():
                    if name.startswith("import"):
                        imported.unlink(missing_ok=True)
                    runs[name].append(measure(args, cwd=options.before
                                              if name == "import (before)" else REPO))
            for name, measured in runs.items():
                peak = statistics.median(p for p, _ in measured)
                seconds = statistics.median(t for _, t in measured)
                rows.append((size, name, peak, seconds))
                if options.rounds > 1:
                    spread = max(t for _, t in measured) - min(t for _, t in measured)
                    print(f"  {name:<24} time spread over {options.rounds} rounds: "
                          f"{spread:.2f} s", flush=True)
            print(f"  export file: {export.stat().st_size / (1 << 20):.1f} MiB", flush=True)
        print()
        names = list(dict.fromkeys(name for _, name, _, _ in rows))
        header = "".join(f"{size:>22,}" for size in sizes)
        print(f"{'command (peak RSS MiB / s)':<28}{header}")
        for name in names:
            cells = "".join(
                f"{peak:>12.0f} / {seconds:6.2f}" for size in sizes
                for n, (s, nm, peak, seconds) in enumerate(rows) if s == size and nm == name
            )
            print(f"{name:<28}{cells}")
        base = {s: peak for s, nm, peak, _ in rows if nm == "baseline (sessions)"}
        print("\npeak RSS above the baseline, per 1,000 events (flat: ~0 and the same at "
              "every size):")
        for name in [n for n in names if not n.startswith("baseline")]:
            growth = "  ".join(
                f"{size:,}: {(peak - base[size]) / size * 1000:6.2f} MiB"
                for s, nm, peak, _ in rows if nm == name for size in [s]
            )
            print(f"  {name:<24}{growth}")


if __name__ == "__main__":
    main()
