"""A process that prunes every session of a store into an archive directory until killed (run
as a script, not collected): the kill test of ``test_prune_atomic.py``.

    python _prune_child.py URL ARCHIVE_DIR

Prints ``ready``, then prunes every session (all are older than a day) into ARCHIVE_DIR, and
prints ``done`` when nothing is left.
"""

from __future__ import annotations

import asyncio
import sys
import time

from eventstore import open_store


async def main(url: str, archive: str) -> None:
    store = await open_store(url)
    try:
        print("ready", flush=True)
        await store.prune(older_than=86_400, archive=archive, now=time.time() + 10 * 86_400)
        print("done", flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
