"""A process that forks one session again and again until killed (run as a script, not
collected): the kill test of ``test_fork_atomic.py``.

    python _fork_child.py URL ORIGIN SEQ

Prints ``ready``, then forks ORIGIN at SEQ into ``fork-0``, ``fork-1`` … and prints each id
once its fork returned.
"""

from __future__ import annotations

import asyncio
import sys

from eventstore import open_store


async def main(url: str, origin: str, seq: int) -> None:
    store = await open_store(url)
    try:
        print("ready", flush=True)
        n = 0
        while True:
            made = await store.fork(origin, at=seq, new_session_id=f"fork-{n}")
            print(made.id, flush=True)
            n += 1
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
