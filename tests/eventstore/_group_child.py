"""A writer process for the group-commit crash test (run as a script, not collected).

    python _group_child.py URL PREFIX SESSIONS K

Appends batches of K events to each of the sessions ``g0 … g{SESSIONS-1}`` concurrently (one
task per session, each append awaited, with ``expected_version``) until killed, and prints
``SESSION BATCH`` once each append returned.
"""

from __future__ import annotations

import asyncio
import sys

from eventstore import Event, open_store


async def writer(store: object, session_id: str, prefix: str, k: int) -> None:
    from eventstore import EventStore

    assert isinstance(store, EventStore)
    version = await store.version(session_id)
    n = 0
    while True:
        tag = f"{prefix}-{session_id}-{n}"
        batch = [Event(author="w", id=f"{tag}-{i}", custom_metadata={"batch": tag})
                 for i in range(k)]
        await store.append(session_id, batch, expected_version=version)
        version += k
        sys.stdout.write(f"{session_id} {tag}\n")
        sys.stdout.flush()
        n += 1


async def main(url: str, prefix: str, sessions: int, k: int) -> None:
    store = await open_store(url)
    print("ready", flush=True)
    await asyncio.gather(*(writer(store, f"g{i}", prefix, k) for i in range(sessions)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
