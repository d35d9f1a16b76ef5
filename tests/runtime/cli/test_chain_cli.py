"""The hash chain at the CLI: ``evs show`` marks a damaged event inline, ``evs export`` carries
the chain, ``evs import`` refuses an export whose events no longer match it (unless
``--force``), and a keyed importer signs the events again under the new session id."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
from _cli_support import invoke

from eventstore import open_store
from eventstore.commands._maintain import verify_session


def _export(paused_db: Path, dump: Path) -> list[bytes]:
    result = invoke("export", "s1", "--db", str(paused_db), "--output", str(dump))
    assert result.exit_code == 0, result.stderr
    return dump.read_bytes().splitlines()


def test_show_marks_an_edited_event_inline(paused_db: Path) -> None:
    with sqlite3.connect(paused_db) as conn:
        conn.execute("UPDATE evs_events SET author = 'mallory' WHERE seq = 3")
    shown = invoke("show", "s1", "--db", str(paused_db))
    assert "! chain_edited: seq 3 was changed" in shown.stdout
    verified = invoke("verify", "s1", "--db", str(paused_db), "--json")
    assert verified.exit_code == 3
    assert '"code":"chain_edited"' in verified.stdout.replace(" ", "")


def test_export_carries_the_chain_and_import_checks_it(paused_db: Path, tmp_path: Path) -> None:
    dump = tmp_path / "s1.jsonl"
    lines = _export(paused_db, dump)
    header = orjson.loads(lines[0])
    assert len(header["chain"]["hashes"]) == header["events"]

    ok = invoke("import", str(dump), "--db", str(tmp_path / "ok.db"), "--session-id", "copy")
    assert ok.exit_code == 0, ok.stderr

    event = orjson.loads(lines[3])
    event["author"] = "mallory"
    lines[3] = orjson.dumps(event)
    dump.write_bytes(b"".join(line + b"\n" for line in lines))
    refused = invoke("import", str(dump), "--db", str(tmp_path / "refused.db"))
    assert refused.exit_code == 1
    assert "seq 3: chain_edited" in refused.stderr
    forced = invoke("import", str(dump), "--db", str(tmp_path / "forced.db"), "--force")
    assert forced.exit_code == 0, forced.stderr


def test_keyed_import_under_a_new_id_is_signed_again(paused_db: Path, tmp_path: Path) -> None:
    dump = tmp_path / "s1.jsonl"
    _export(paused_db, dump)
    target = tmp_path / "keyed.db"
    env = {"EVS_SIGNING_KEY": "importer's key"}
    imported = invoke("import", str(dump), "--db", str(target), "--session-id", "fork-1",
                      env=env)
    assert imported.exit_code == 0, imported.stderr
    assert invoke("verify", "fork-1", "--db", str(target), env=env).exit_code == 0

    import asyncio

    async def check() -> None:
        async with await open_store(paused_db) as origin, \
                await open_store(target, signing_key="importer's key") as copy:
            a = await origin.backend.read("s1", after=None, upto=None, backwards=False,
                                          limit=None)
            b = await copy.backend.read("fork-1", after=None, upto=None, backwards=False,
                                        limit=None)
            # The session id is not hashed: the copy's chain is the origin's, byte for byte.
            assert [r.chain_hash for r in a] == [r.chain_hash for r in b]
            assert all(r.signature for r in b)
            assert await copy.untrusted("fork-1") == {}
            assert await verify_session(copy, "fork-1") == []

    asyncio.run(check())


def test_show_marks_a_removed_tail_after_the_last_event(paused_db: Path) -> None:
    with sqlite3.connect(paused_db) as conn:
        (last,) = conn.execute("SELECT max(seq) FROM evs_events").fetchone()
        conn.execute("DELETE FROM evs_events WHERE seq >= ?", (last - 1,))
    lines = invoke("show", "s1", "--db", str(paused_db)).stdout.splitlines()
    assert lines[-1].startswith(f"      ! tail_removed: the session's head record is at seq "
                                f"{last} but its log ends at seq {last - 2}")
    shown = orjson.loads(invoke("show", "s1", "--db", str(paused_db), "--json").stdout)
    assert (last - 1, "tail_removed") in {(p["seq"], p["code"]) for p in shown["problems"]}
