"""Peak memory and time of ``evs`` on big logs: does a command's cost grow with the log?

    .venv/bin/python scripts/bench_biglog.py [--sizes 10000,100000,1000000]

For each size a SQLite file holds one session of that many realistic agent events
(``_bench_events``). Each command then runs in its own process, and the process's peak RSS
(``wait4``'s ``ru_maxrss``) and wall time are printed side by side with the baseline: the same
process doing nothing but opening the store (``evs sessions``). What a flat command looks like:
the same peak at every size. Commands: ``export`` (to a file), ``import`` of that export,
``verify SESSION``, ``show SESSION --last 20``, ``state SESSION``.

Nothing here is judged: it prints the growth so that a regression (a command that loads the
whole log) shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_events import realistic_event

from eventstore import open_store

EVS = [sys.executable, "-m", "runtime.cli"]
SESSION = "big"
BATCH = 500


async def build(path: Path, size: int) -> None:
    """One session of ``size`` realistic events, appended in batches."""
    async with await open_store(str(path), auto_upgrade=True) as store:
        await store.create_session(app_name="bench", user_id="u", session_id=SESSION)
        version = 0
        for start in range(0, size, BATCH):
            batch = [realistic_event(i) for i in range(start, min(size, start + BATCH))]
            await store.append(SESSION, batch, expected_version=version)
            version += len(batch)


def measure(args: list[str]) -> tuple[float, float]:
    """Run ``evs args`` alone; return (peak RSS in MiB, seconds). Output is discarded."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        pid = os.posix_spawn(EVS[0], [*EVS, *args], os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        ])
        _, status, usage = os.wait4(pid, 0)
        del sink
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise SystemExit(f"evs {' '.join(args)} failed with status {status}")
    return usage.ru_maxrss / 1024, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated session sizes (default 10000,100000)")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows: list[tuple[int, str, float, float]] = []
        for size in sizes:
            db = Path(tmp) / f"big-{size}.db"
            started = time.perf_counter()
            asyncio.run(build(db, size))
            built = time.perf_counter() - started
            mib = db.stat().st_size / (1 << 20)
            print(f"{size:>9,} events: built in {built:6.1f} s, {mib:7.1f} MiB "
                  f"({db.stat().st_size / size:5.0f} bytes/event)", flush=True)
            export = Path(tmp) / f"big-{size}.jsonl"
            commands = {
                "baseline (sessions)": ["sessions", "--db", str(db)],
                "export -o FILE": ["export", SESSION, "--db", str(db), "-o", str(export)],
                "import": ["import", str(export), "--db", str(Path(tmp) / f"in-{size}.db"),
                           "--session-id", "copy"],
                "verify SESSION": ["verify", SESSION, "--db", str(db)],
                "show --last 20": ["show", SESSION, "--db", str(db), "--last", "20"],
                "state": ["state", SESSION, "--db", str(db)],
            }
            for name, args in commands.items():
                peak, seconds = measure(args)
                rows.append((size, name, peak, seconds))
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
        base = {s: peak for s, nm, peak, _ in rows if nm.startswith("baseline")}
        print("\npeak RSS above the baseline, per 1,000 events (flat: ~0 and the same at "
              "every size):")
        for name in names[1:]:
            growth = "  ".join(
                f"{size:,}: {(peak - base[size]) / size * 1000:6.2f} MiB"
                for s, nm, peak, _ in rows if nm == name for size in [s]
            )
            print(f"  {name:<24}{growth}")


if __name__ == "__main__":
    main()
