"""``evs import`` reads and writes an export a page at a time (``IMPORT_PAGE``), in one
transaction: a log of several pages keeps the all-or-nothing rule (a bad line, a truncated
file or a log ``evs verify`` would flag at the end leaves nothing), comes back identical, and
``--force`` keeps the exported chain of every page — on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from _cli_support import (
    FINISHING_ARTIFACTS,
    finishing_log,
    invoke,
    make_session,
    paused_weather_log,
    response,
)

from eventstore import Content, Event, open_store
from eventstore.commands import _import

PAGE = 3
"""Events per page in these tests: the 13-event log spans five pages."""


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_import, "IMPORT_PAGE", PAGE)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "target.db")
    url = str(request.getfixturevalue("empty_postgres_url"))
    assert invoke("db", "upgrade", "--db", url).exit_code == 0
    return url


def _export_lines(tmp_path: Path, extra: list[Event] | None = None) -> list[bytes]:
    source = tmp_path / "source.db"
    make_session(str(source), paused_weather_log() + finishing_log() + (extra or []),
                 artifacts=FINISHING_ARTIFACTS)
    result = invoke("export", "s1", "--db", str(source))
    assert result.exit_code == 0, result.stderr
    return result.stdout_bytes.splitlines()


def _write(tmp_path: Path, lines: list[bytes], name: str = "dump.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _sessions(url: str) -> list[object]:
    listed = invoke("sessions", "--db", url, "--json")
    assert listed.exit_code == 0, listed.stderr
    sessions: list[object] = orjson.loads(listed.stdout)["sessions"]
    return sessions


def _event_count(lines: list[bytes]) -> int:
    return int(orjson.loads(lines[0])["events"])


def test_a_bad_last_line_of_a_multi_page_log_leaves_nothing(tmp_path: Path, target: str) -> None:
    lines = _export_lines(tmp_path)
    events = _event_count(lines)
    assert events > 3 * PAGE
    last_event = events  # line 1 is the header
    lines[last_event] = lines[last_event].replace(b'"author"', b'"author":1,"x"', 1)
    refused = invoke("import", str(_write(tmp_path, lines)), "--db", target)
    assert refused.exit_code == 1, refused.stdout
    assert f"line {last_event + 1}: not a valid event" in refused.stderr
    assert _sessions(target) == []


def test_a_truncated_multi_page_log_leaves_nothing(tmp_path: Path, target: str) -> None:
    lines = _export_lines(tmp_path)
    del lines[_event_count(lines)]  # the last event line
    refused = invoke("import", str(_write(tmp_path, lines)), "--db", target)
    assert refused.exit_code == 1, refused.stdout
    assert "(truncated?)" in refused.stderr
    assert _sessions(target) == []


def test_a_problem_on_the_last_page_refuses_the_pages_before(tmp_path: Path, target: str
                                                            ) -> None:
    answered_again = Event(author="user", content=Content(role="user", parts=(
        response("c1", "get_weather", temp_c=99),)))
    lines = _export_lines(tmp_path, [answered_again])
    refused = invoke("import", str(_write(tmp_path, lines)), "--db", target)
    assert refused.exit_code == 1, refused.stdout
    assert f"seq {_event_count(lines)}: answered_twice:" in refused.stderr
    assert _sessions(target) == []
    forced = invoke("import", str(_write(tmp_path, lines)), "--db", target, "--force")
    assert forced.exit_code == 0, forced.stderr


def test_multi_page_round_trip_is_identical(tmp_path: Path, target: str) -> None:
    lines = _export_lines(tmp_path)
    imported = invoke("import", str(_write(tmp_path, lines)), "--db", target, "--json")
    assert imported.exit_code == 0, imported.stderr
    assert orjson.loads(imported.stdout) == {"session_id": "s1",
                                             "events": _event_count(lines), "artifacts": 1}
    again = invoke("export", "s1", "--db", target)
    assert again.exit_code == 0, again.stderr
    back = again.stdout_bytes.splitlines()
    assert back[1:] == lines[1:]  # every event and artifact line, byte for byte
    first, second = orjson.loads(lines[0]), orjson.loads(back[0])
    del first["created_at"], second["created_at"]
    assert first == second  # the same chain too: the store chains the same bytes again
    assert invoke("verify", "s1", "--db", target).exit_code == 0


def test_forced_import_keeps_the_chain_of_every_page(tmp_path: Path, target: str) -> None:
    lines = _export_lines(tmp_path)
    header = orjson.loads(lines[0])
    edited = 2 * PAGE + 2  # an event on the third page
    before = lines[edited]
    lines[edited] = before.replace(b'"weather_agent"', b'"other_agent"', 1)
    assert lines[edited] != before
    dump = _write(tmp_path, lines)
    refused = invoke("import", str(dump), "--db", target)
    assert refused.exit_code == 1
    assert f"seq {edited}: chain_edited" in refused.stderr
    assert _sessions(target) == []
    forced = invoke("import", str(dump), "--db", target, "--force")
    assert forced.exit_code == 0, forced.stderr

    async def links() -> list[tuple[int, str]]:
        async with await open_store(target) as store:
            found = await store.backend.read_imported("s1", after=0, limit=1000)
            return [(link.seq, link.chain_hash.hex()) for link in found]

    assert asyncio.run(links()) == list(enumerate(header["chain"]["hashes"], start=1))
    verify = invoke("verify", "s1", "--db", target, "--json")
    assert verify.exit_code == 3
    findings = orjson.loads(verify.stdout)["findings"]
    assert [(f["seq"], f["code"]) for f in findings] == [(edited, "imported_chain_edited")]


def test_an_event_id_repeated_pages_later_is_named_and_leaves_nothing(tmp_path: Path,
                                                                    target: str) -> None:
    lines = _export_lines(tmp_path)
    events = _event_count(lines)
    first_id = orjson.loads(lines[1])["id"]
    last = orjson.loads(lines[events])
    lines[events] = lines[events].replace(orjson.dumps(last["id"]), orjson.dumps(first_id), 1)
    refused = invoke("import", str(_write(tmp_path, lines)), "--db", target)
    assert refused.exit_code == 1, refused.stdout
    assert (f"line {events + 1}: event id {first_id!r} already appears on line 2."
            in refused.stderr)
    assert _sessions(target) == []
