"""A writer process for the concurrency and crash tests (run as a script, not collected).

    python _evs_child.py contend URL SESSION NAME APPENDS   # waits for "go" on stdin
    python _evs_child.py crash URL SESSION PREFIX K          # appends batches until killed
    python _evs_child.py share URL APP NAME N                # waits for "go" on stdin

``contend`` appends APPENDS pairs of events with ``expected_version``, retrying on
ConcurrencyError, and prints one JSON line: the acknowledged event ids and the conflict count.
``crash`` appends batches of K events and prints each batch id once the append returned.
``share`` creates N sessions of APP (user NAME) and appends to them in turn, every other event
changing ``user:``/``app:`` state, then prints one JSON line: the event ids in append order.
"""

from __future__ import annotations

import asyncio
import json
import sys

from eventstore import ConcurrencyError, Event, EventActions, open_store


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


async def share(url: str, app_name: str, name: str, sessions: int) -> None:
    store = await open_store(url)
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        ids = [f"{name}-s{n}" for n in range(sessions)]
        for sid in ids:
            await store.create_session(app_name=app_name, user_id=name, session_id=sid)
        appended: list[str] = []
        for i in range(4 * sessions):
            sid = ids[i % sessions]
            delta: dict[str, object] = {"n": i}
            if i % 2:
                delta.update({"user:last": f"{name}-{i}", "app:last": f"{name}-{i}"})
            event = Event(author=name, id=f"{name}-e{i}", actions=EventActions(state_delta=delta))
            await store.append(sid, event, expected_version=None)
            appended.append(event.id)
        print(json.dumps({"appended": appended}), flush=True)
    finally:
        await store.aclose()


def main() -> None:
    mode, url, session_id, name, number = sys.argv[1:6]
    if mode == "contend":
        asyncio.run(contend(url, session_id, name, int(number)))
    elif mode == "crash":
        asyncio.run(crash(url, session_id, name, int(number)))
    elif mode == "share":
        asyncio.run(share(url, session_id, name, int(number)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
