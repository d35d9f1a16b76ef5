"""``evs import --force`` keeps the chain the export carried as evidence: the imported session is
chained by the importing store (usable), and ``evs verify`` still names where the exported
chain broke — on SQLite and PostgreSQL, keyed and not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from _cli_support import AGENT, invoke, make_session, paused_weather_log, text

from eventstore import Content, Event, open_store


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "target.db")
    url = str(request.getfixturevalue("empty_postgres_url"))
    assert invoke("db", "upgrade", "--db", url).exit_code == 0
    return url


def _export(tmp_path: Path, *, keyed: bool, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    source = tmp_path / "source.db"
    if keyed:
        monkeypatch.setenv("EVS_SIGNING_KEY", "exporter's key")
    make_session(str(source), paused_weather_log())
    lines = invoke("export", "s1", "--db", str(source)).stdout_bytes.splitlines()
    monkeypatch.delenv("EVS_SIGNING_KEY", raising=False)
    return lines


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_forced_import_keeps_the_exported_chain_and_verify_names_its_break(
    tmp_path: Path, target: str, keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _export(tmp_path, keyed=keyed, monkeypatch=monkeypatch)
    header = orjson.loads(lines[0])
    assert b'"Paris"' in lines[2]
    lines[2] = lines[2].replace(b'"Paris"', b'"Rome"')  # seq 2, edited in the file
    dump = tmp_path / "edited.jsonl"
    dump.write_bytes(b"\n".join(lines) + b"\n")

    refused = invoke("import", str(dump), "--db", target, "--session-id", "copy")
    assert refused.exit_code == 1, refused.stdout
    assert "seq 2: chain_edited" in refused.stderr
    forced = invoke("import", str(dump), "--db", target, "--session-id", "copy", "--force")
    assert forced.exit_code == 0, forced.stderr

    verify = invoke("verify", "copy", "--db", target, "--json")
    assert verify.exit_code == 3, verify.stdout
    findings = orjson.loads(verify.stdout)["findings"]
    codes = [(f["seq"], f["code"]) for f in findings]
    assert codes == [(2, "imported_chain_edited")], findings
    assert "'s1'" in findings[0]["message"]
    assert "evs import --force" in findings[0]["message"]

    async def check() -> None:
        async with await open_store(target) as store:
            links = await store.backend.read_imported("copy", after=0, limit=100)
            assert [link.seq for link in links] == list(range(1, 9))
            assert [link.chain_hash.hex() for link in links] == header["chain"]["hashes"]
            assert [None if link.signature is None else link.signature.hex()
                    for link in links] == header["chain"]["signatures"]
            assert all(link.origin_session_id == "s1" for link in links)
            if keyed:
                assert all(link.signature is not None for link in links)
            # Usable: the imported event reads back as it was imported, and the session
            # takes appends.
            events = await store.read("copy")
            assert events[1].function_calls()[0].args == {"city": "Rome"}
            await store.append("copy", Event(author=AGENT, content=Content(
                role="model", parts=(text("More."),))), expected_version=8)

    asyncio.run(check())
    again = invoke("verify", "copy", "--db", target, "--json")
    assert [(f["seq"], f["code"]) for f in orjson.loads(again.stdout)["findings"]] == codes


def test_forced_import_of_a_sound_chain_verifies_clean(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _export(tmp_path, keyed=False, monkeypatch=monkeypatch)
    dump = tmp_path / "sound.jsonl"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    target = str(tmp_path / "t.db")
    assert invoke("import", str(dump), "--db", target, "--force").exit_code == 0
    verify = invoke("verify", "s1", "--db", target)
    assert verify.exit_code == 0, verify.stdout


def test_plain_import_keeps_no_evidence(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _export(tmp_path, keyed=False, monkeypatch=monkeypatch)
    dump = tmp_path / "sound.jsonl"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    target = str(tmp_path / "t.db")
    assert invoke("import", str(dump), "--db", target).exit_code == 0

    async def links() -> int:
        async with await open_store(target) as store:
            return len(await store.backend.read_imported("s1", after=0, limit=100))

    assert asyncio.run(links()) == 0
