"""``evs heads`` exports each session's head; ``evs verify --expect-heads FILE`` reports the
sessions whose head moved back (a shorter log, another event at the seq, a session gone), so a
history cut short by a failover is not mistaken for a complete one."""

from __future__ import annotations

from pathlib import Path

import orjson
from _cli_support import build, invoke, make_session, paused_weather_log

from eventstore import EventStore


def _db(tmp_path: Path) -> str:
    url = str(tmp_path / "evs.db")
    assert invoke("db", "upgrade", "--db", url).exit_code == 0
    make_session(url, paused_weather_log())
    make_session(url, paused_weather_log()[:2], session_id="s2")
    return url


def test_heads_export_then_verify_is_clean(tmp_path: Path) -> None:
    url = _db(tmp_path)
    out = tmp_path / "heads.jsonl"
    assert invoke("heads", "--db", url, "--output", str(out)).exit_code == 0
    heads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [(h["session_id"], h["seq"]) for h in heads] == [
        ("s1", len(paused_weather_log())), ("s2", 2)]
    assert all(len(h["chain_hash"]) == 64 for h in heads)
    verified = invoke("verify", "--db", url, "--expect-heads", str(out))
    assert verified.exit_code == 0, verified.stdout


def test_verify_expect_heads_reports_heads_moved_back(tmp_path: Path) -> None:
    url = _db(tmp_path)
    out = tmp_path / "heads.jsonl"
    invoke("heads", "--db", url, "--output", str(out))
    s1, s2 = (orjson.loads(line) for line in out.read_bytes().splitlines())

    async def delete_s1(store: EventStore) -> None:
        await store.delete_session("s1")

    build(url, delete_s1)
    make_session(url, paused_weather_log()[:1], session_id="s1")  # shorter, and new
    records = [
        s1,                                            # seq 7: the log ends at 1
        {**s2, "seq": 1, "event_id": None},            # seq 2's hash: not seq 1's
        {"session_id": "gone", "seq": 3},
    ]
    out.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    verified = invoke("verify", "--db", url, "--expect-heads", str(out), "--json")
    assert verified.exit_code == 3
    found = {(f["session_id"], f["seq"]): f["message"]
             for f in orjson.loads(verified.stdout)["findings"]
             if f["code"] == "head_moved_back"}
    assert set(found) == {("s1", s1["seq"]), ("s2", 1), ("gone", 3)}, found
    assert "the log ends at seq 1" in found[("s1", s1["seq"])]
    assert "another chain hash" in found[("s2", 1)]
    assert "does not exist" in found[("gone", 3)]
    # One session: only its heads are checked.
    one = invoke("verify", "s2", "--db", url, "--expect-heads", str(out), "--json")
    assert [(f["session_id"], f["code"]) for f in orjson.loads(one.stdout)["findings"]] == [
        ("s2", "head_moved_back")]


def test_verify_expect_heads_refuses_a_bad_file(tmp_path: Path) -> None:
    url = _db(tmp_path)
    bad = tmp_path / "heads.jsonl"
    bad.write_text('{"session_id": "s1", "seq": 1}\nnot json\n')
    refused = invoke("verify", "--db", url, "--expect-heads", str(bad))
    assert refused.exit_code == 1
    assert "Line 2 of" in refused.stderr
