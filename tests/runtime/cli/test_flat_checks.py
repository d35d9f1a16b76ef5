"""``evs verify`` and ``evs import`` judge a log page by page in flat memory: what the checks
across pages need (``LogCheck``) and the chain an export's header carries (``read_header``)
are kept in temporary files; the findings and the imported chain are those of the whole log."""

from __future__ import annotations

import asyncio
import io
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from _cli_support import (
    AGENT,
    FINISHING_ARTIFACTS,
    REPO,
    call,
    finishing_log,
    invoke,
    make_session,
    paused_weather_log,
    response,
)

from eventstore import Content, Event, EventActions, ToolConfirmation, _export, open_store
from eventstore._codec import with_seq
from eventstore._exchange import ExportFormatError, dump_header, parse_header
from eventstore.commands import _carried, _import, _maintain
from eventstore.commands._carried import read_header
from eventstore.commands._log_check import LogCheck
from eventstore.commands._maintain import verify_session
from eventstore.commands._verify import check_events

CONFIRM = "adk_request_confirmation"


def _confirmation(cid: str, original: str, name: str, **args: object) -> Event:
    return Event(author=AGENT, content=Content(role="model", parts=(
        call(cid, CONFIRM, originalFunctionCall={"id": original, "name": name, "args": args},
             toolConfirmation={"hint": "", "confirmed": False, "payload": None}),)))


def _anomalous_log() -> list[Event]:
    """A log with each problem the checks across pages find, its parts pages apart."""
    said = Event(author="user", content=Content(role="user", parts=(
        response("c1", "get_weather", temp_c=22),)))
    return [
        *paused_weather_log(), *finishing_log(),
        said,  # c1 answered twice, seven events after its first answer
        Event(author="user", content=Content(role="user", parts=(
            response("nope", "get_weather", ok=True),))),
        Event(author=AGENT, content=Content(role="model", parts=(
            call("c1", "get_weather", city="Rome"),))),  # a reused call id
        _confirmation("confirm-2", "c3", "paid_lookup", city="Paris"),  # matches
        _confirmation("confirm-3", "c3", "paid_lookup", city="Rome"),  # other args
        _confirmation("confirm-4", "c9", "later"),  # its call comes later
        Event(author=AGENT, content=Content(role="model", parts=(call("c9", "later"),))),
        _confirmation("confirm-5", "c2", "other_name", city="Atlantis"),
        Event(author="user", content=Content(role="user", parts=(
            response("c4", "forecast", days=[]),))),  # long-running: not answered twice
        Event(author=AGENT, content=Content(role="user", parts=(
            response("c9", "later", error={"kind": "confirmation_required"}),)),
              actions=EventActions(requested_tool_confirmations={
                  "c9": ToolConfirmation(hint="")})),
        Event(author=AGENT, content=Content(role="user", parts=(response("c9", "later"),))),
        Event(author="user", content=Content(role="user", parts=(
            response("c2", "get_weather", temp_c=1),))),  # c2 answered twice too
    ]


@pytest.mark.parametrize("page", [1, 2, 3, 7, 1000])
def test_log_check_in_pages_finds_what_check_events_finds_in_the_whole_log(page: int) -> None:
    events = [with_seq(e, n) for n, e in enumerate(_anomalous_log(), start=1)]
    whole = check_events("s1", events)
    assert {f.code for f in whole} >= {
        "answered_twice", "response_without_call", "duplicate_call_id",
        "confirmation_call_mismatch", "confirmation_unknown_call"}
    with LogCheck("s1") as check:
        for start in range(0, len(events), page):
            check.add(events[start:start + page])
        assert check.findings() == whole


def test_log_check_first_places_are_the_first_across_pages() -> None:
    with LogCheck("s1") as check:
        assert check.first_places([("a", 1), ("b", 2), ("a", 3)]) == {"a": 1, "b": 2}
        assert check.first_places([("c", 4), ("b", 5)]) == {"c": 4, "b": 2}
        assert check.first_places([("c", 6)]) == {"c": 4}


def _export_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, keyed: bool) -> Path:
    source = tmp_path / "source.db"
    if keyed:
        monkeypatch.setenv("EVS_SIGNING_KEY", "exporter's key")
    make_session(str(source), paused_weather_log() + finishing_log(),
                 artifacts=FINISHING_ARTIFACTS)
    dump = tmp_path / "dump.jsonl"
    assert invoke("export", "s1", "--db", str(source), "-o", str(dump)).exit_code == 0
    monkeypatch.delenv("EVS_SIGNING_KEY", raising=False)
    return dump


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
@pytest.mark.parametrize("chunk", [16, 67, 1 << 20], ids=["tiny", "one-hash", "whole"])
def test_read_header_carries_the_chain_parse_header_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool, chunk: int
) -> None:
    monkeypatch.setattr(_carried, "HEADER_CHUNK", chunk)
    data = _export_file(tmp_path, monkeypatch, keyed=keyed).read_bytes()
    first = data.split(b"\n", 1)[0]
    expected = parse_header(1, first)
    assert expected.chain is not None
    assert expected.events == 13
    assert (expected.chain_signatures is not None) == keyed
    for blank in (b"", b"\n  \n"):  # the header is the first line that is not blank
        file = io.BytesIO(blank + data)
        header, chain, number = read_header(file)
        assert chain is not None
        try:
            assert number == 1 + blank.count(b"\n")
            assert file.tell() == len(blank) + len(first) + 1  # at the first event line
            assert header.chain is None
            assert (header.app_name, header.session_id, header.events) == (
                expected.app_name, expected.session_id, expected.events)
            assert chain.page(1, 13) == [(expected.chain_hash(s), expected.signature(s))
                                         for s in range(1, 14)]
        finally:
            chain.close()


@pytest.mark.parametrize("edit", [
    pytest.param(lambda h: h.replace(b'"hashes":["', b'"hashes": ["'), id="spaced"),
    pytest.param(lambda h: h.replace(b'"signatures":[', b'"signatures":[ '), id="spaced-2"),
    pytest.param(lambda h: h.replace(b'"chain":{', b'"chain":{"x":1,'), id="extra-key"),
])
def test_read_header_of_another_shape_reads_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[bytes], bytes]
) -> None:
    monkeypatch.setattr(_carried, "HEADER_CHUNK", 16)
    data = _export_file(tmp_path, monkeypatch, keyed=True).read_bytes()
    first, rest = data.split(b"\n", 1)
    edited = edit(first)
    assert edited != first
    expected = parse_header(1, edited)
    file = io.BytesIO(edited + b"\n" + rest)
    _, chain, _ = read_header(file)
    assert chain is not None
    try:
        assert file.tell() == len(edited) + 1
        assert chain.page(1, 13) == [(expected.chain_hash(s), expected.signature(s))
                                     for s in range(1, 14)]
    finally:
        chain.close()


@pytest.mark.parametrize("edit", [
    pytest.param(lambda h: h.replace(b'"hashes":["', b'"hashes":["zz', 1), id="bad-hash"),
    pytest.param(lambda h: h.replace(b'"hashes":["', b'"hashes":["00",', 1), id="one-more"),
    pytest.param(lambda h: h[:-3] + b",null]}}", id="signature-more"),
    pytest.param(lambda h: h[:-2], id="cut"),
])
def test_read_header_refuses_what_parse_header_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[bytes], bytes]
) -> None:
    monkeypatch.setattr(_carried, "HEADER_CHUNK", 16)
    data = _export_file(tmp_path, monkeypatch, keyed=True).read_bytes()
    first, rest = data.split(b"\n", 1)
    edited = edit(first)
    with pytest.raises(ExportFormatError) as whole:
        parse_header(1, edited + b"\n")  # the line as a file gives it
    with pytest.raises(ExportFormatError) as read:
        read_header(io.BytesIO(edited + b"\n" + rest))
    assert str(read.value) == str(whole.value)


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_forced_import_of_a_header_read_in_chunks_keeps_the_exported_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    monkeypatch.setattr(_carried, "HEADER_CHUNK", 16)
    monkeypatch.setattr(_import, "IMPORT_PAGE", 3)
    dump = _export_file(tmp_path, monkeypatch, keyed=keyed)
    header = orjson.loads(dump.read_bytes().split(b"\n", 1)[0])
    target = str(tmp_path / "target.db")
    forced = invoke("import", str(dump), "--db", target, "--session-id", "copy", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert invoke("verify", "copy", "--db", target).exit_code == 0

    async def links() -> list[tuple[str, str | None]]:
        async with await open_store(target) as store:
            key = await store.session_key("copy", app_name="weather", user_id="ada")
            found = await store.backend.read_imported(key, after=0, limit=100)
        return [(link.chain_hash.hex(), None if link.signature is None
                 else link.signature.hex()) for link in found]

    carried = header["chain"]
    assert asyncio.run(links()) == list(zip(carried["hashes"], carried["signatures"],
                                            strict=True))


def test_import_in_chunks_refuses_an_edited_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_carried, "HEADER_CHUNK", 16)
    monkeypatch.setattr(_import, "IMPORT_PAGE", 3)
    dump = _export_file(tmp_path, monkeypatch, keyed=False)
    lines = dump.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"Paris"', b'"Rome"')
    dump.write_bytes(b"\n".join(lines))
    refused = invoke("import", str(dump), "--db", str(tmp_path / "t.db"))
    assert refused.exit_code == 1
    assert "seq 2: chain_edited" in refused.stderr


def _build(path: Path, size: int) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from _bench_events import realistic_event
    finally:
        sys.path.remove(str(REPO / "scripts"))

    async def work() -> None:
        async with await open_store(str(path), auto_upgrade=True) as store:
            await store.create_session(app_name="bench", user_id="u", session_id="big")
            for start in range(0, size, 1000):
                batch = [realistic_event(i) for i in range(start, min(size, start + 1000))]
                await store.append("big", batch, expected_version=start)

    asyncio.run(work())


def _peak(work: Callable[[], object]) -> float:
    """The peak of Python's allocations (MiB) while ``work`` runs."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # three commands on two logs under tracemalloc: about 20 s of CPU
def test_export_verify_and_import_memory_does_not_grow_with_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_maintain, "VERIFY_PAGE", 500)
    monkeypatch.setattr(_import, "IMPORT_PAGE", 500)
    monkeypatch.setattr(_export, "EXPORT_PAGE", 500)
    peaks: dict[str, list[float]] = {"export": [], "verify": [], "import": []}
    for size in (2_000, 12_000):
        db = tmp_path / f"big-{size}.db"
        _build(db, size)
        dump = tmp_path / f"big-{size}.jsonl"
        exported: list[int] = []

        def write(db: Path = db, dump: Path = dump, codes: list[int] = exported) -> None:
            codes.append(invoke("export", "big", "--db", str(db), "-o", str(dump)).exit_code)

        peaks["export"].append(_peak(write))
        assert exported == [0]

        async def verify(db: Path = db) -> None:
            async with await open_store(str(db)) as store:
                assert await verify_session(store, "big") == []

        peaks["verify"].append(_peak(lambda: asyncio.run(verify())))
        target = tmp_path / f"in-{size}.db"
        codes: list[int] = []

        def load(dump: Path = dump, target: Path = target, codes: list[int] = codes) -> None:
            codes.append(invoke("import", str(dump), "--db", str(target)).exit_code)

        peaks["import"].append(_peak(load))
        assert codes == [0]
    # Before the checks kept their state on disk and export its chain: ~6 MiB more (verify
    # and import alike), export ~4.5 MiB.
    # more for the 10,000 more events.
    for name, (small, big) in peaks.items():
        assert big - small < 1.5, (name, peaks)


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_export_writes_the_header_dump_header_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    monkeypatch.setattr(_export, "EXPORT_PAGE", 3)
    dump = _export_file(tmp_path, monkeypatch, keyed=keyed)
    first = dump.read_bytes().split(b"\n", 1)[0]
    if keyed:
        monkeypatch.setenv("EVS_SIGNING_KEY", "exporter's key")

    async def expected() -> bytes:
        async with await open_store(str(tmp_path / "source.db")) as store:
            key = await store.session_key("s1", app_name="weather", user_id="ada")
            record = await store.backend.get_session(key)
            assert record is not None
            rows = await store.backend.read(key, after=0, upto=None, backwards=False,
                                            limit=None)
        assert all(r.chain_hash is not None for r in rows)
        assert all((r.signature is not None) == keyed for r in rows)
        return dump_header(app_name="weather", user_id="ada", session_id="s1", events=13,
                           created_at=record.created_at, artifacts=1,
                           chain=[(r.chain_hash or b"", r.signature) for r in rows])

    assert first == asyncio.run(expected())
