"""A writer process for the concurrency and crash tests (run as a script, not collected).

    python _evs_child.py contend URL SESSION NAME APPENDS   # waits for "go" on stdin
    python _evs_child.py crash URL SESSION PREFIX K          # appends batches until killed

``contend`` appends APPENDS pairs of events with ``expected_version``, retrying on
ConcurrencyError, and prints one JSON line: the acknowledged event ids and the conflict count.
``crash`` appends batches of K events and prints each batch id once the append returned.
"""

from __future__ import annotations

import asyncio
import json
import sys

from eventstore import ConcurrencyError, Event, open_store


async def contend(url: str, session_id: str, name: str, appends: int) -> None:
    store = await open_store(url)
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        acked: list[str] = []
        conflicts = 0
        for i in range(appends):
            batch = [
                Event(author=name, id=f"{name}-{i}-{part}", custom_metadata={"pair": f"{name}-{i}"})
                for part in ("a", "b")
            ]
            while True:
                version = await store.version(session_id)
                try:
                    await store.append(session_id, batch, expected_version=version)
                except ConcurrencyError:
                    conflicts += 1
                    continue
                acked.extend(e.id for e in batch)
                break
        print(json.dumps({"acked": acked, "conflicts": conflicts}), flush=True)
    finally:
        await store.aclose()


async def crash(url: str, session_id: str, prefix: str, k: int) -> None:
    store = await open_store(url)
    version = await store.version(session_id)
    print("ready", flush=True)
    n = 0
    while True:
        tag = f"{prefix}-{n}"
        batch = [
            Event(author="crasher", id=f"{tag}-{i}",
                  custom_metadata={"batch": tag, "pad": "x" * 300})
            for i in range(k)
        ]
        stored = await store.append(session_id, batch, expected_version=version)
        version = stored[-1].seq or version
        print(tag, flush=True)
        n += 1


def main() -> None:
    mode, url, session_id, name, number = sys.argv[1:6]
    if mode == "contend":
        asyncio.run(contend(url, session_id, name, int(number)))
    elif mode == "crash":
        asyncio.run(crash(url, session_id, name, int(number)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
