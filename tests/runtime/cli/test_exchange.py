"""``evs export``/``import`` keep everything: events byte for byte, artifacts with their version
numbers (``user:`` ones never overwritten), the session's creation time; and ``evs verify``
flags references to artifact versions that do not exist."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import orjson
import pytest
from _cli_support import AGENT, build, invoke, make_session

from eventstore import Event, EventActions, EventStore


def _demo_session(db: Path) -> str:
    result = invoke("demo", "--approve", "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    [session] = orjson.loads(invoke("sessions", "--db", str(db), "--json").stdout)["sessions"]
    return str(session["id"])


def _snapshot(db: Path, session_id: str) -> dict[str, Any]:
    """The stored payloads and every artifact version the session can see, as the store
    holds them."""

    async def work(store: EventStore) -> dict[str, Any]:
        rows = await store.backend.read(session_id, after=None, upto=None, backwards=False,
                                        limit=None)
        artifacts = {}
        for filename, versions in (await store.list_artifacts(session_id)).items():
            for version in versions:
                found = await store.load_artifact(session_id, filename, version=version)
                artifacts[(filename, version)] = (found.data, found.mime_type, found.created_at)
        info = await store.session_info(session_id)
        return {"payloads": [(r.seq, r.event_id, r.kind, r.payload) for r in rows],
                "artifacts": artifacts, "created_at": info.created_at,
                "app_user": (info.app_name, info.user_id)}

    return build(str(db), work)


def _create_session_takes_created_at() -> bool:
    return "created_at" in inspect.signature(EventStore.create_session).parameters


def test_demo_session_round_trips_losslessly(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    sid = _demo_session(source)
    dump = tmp_path / "demo.jsonl"
    exported = invoke("export", sid, "--db", str(source), "--output", str(dump))
    assert exported.exit_code == 0, exported.stderr
    header = orjson.loads(dump.read_bytes().splitlines()[0])
    assert header["artifacts"] == 1  # paris-forecast.md v0

    target = tmp_path / "target.db"
    imported = invoke("import", str(dump), "--db", str(target), "--json")
    assert imported.exit_code == 0, imported.stderr
    assert orjson.loads(imported.stdout)["artifacts"] == 1

    before, after = _snapshot(source, sid), _snapshot(target, sid)
    assert after["payloads"] == before["payloads"]
    assert after["artifacts"] == before["artifacts"]
    assert list(after["artifacts"]) == [("paris-forecast.md", 0)]
    assert after["app_user"] == before["app_user"]
    if _create_session_takes_created_at():
        assert after["created_at"] == before["created_at"]
    for db in (source, target):
        verified = invoke("verify", "--db", str(db))
        assert verified.exit_code == 0, verified.stdout
    again = invoke("export", sid, "--db", str(target), "--output", str(tmp_path / "again.jsonl"))
    assert again.exit_code == 0
    if _create_session_takes_created_at():
        assert (tmp_path / "again.jsonl").read_bytes() == dump.read_bytes()
    else:
        assert (tmp_path / "again.jsonl").read_bytes().splitlines()[1:] == \
            dump.read_bytes().splitlines()[1:]


def _session_with_user_artifact(db: Path, versions: list[bytes], refer: int) -> None:
    make_session(str(db), [Event(author=AGENT, actions=EventActions(
        artifact_delta={"user:prefs.json": refer, "notes.txt": 1}))],
        artifacts=[*(("user:prefs.json", v) for v in versions),
                   ("notes.txt", b"n0"), ("notes.txt", b"n1")])


def test_export_holds_own_artifacts_and_user_versions_up_to_the_newest_referred(
    tmp_path: Path, db: Path
) -> None:
    _session_with_user_artifact(db, [b"p0", b"p1", b"p2"], refer=1)
    lines = invoke("export", "s1", "--db", str(db)).stdout_bytes.splitlines()
    artifacts = [orjson.loads(line)["artifact"] for line in lines[2:]]
    assert [(a["filename"], a["version"]) for a in artifacts] == [
        ("notes.txt", 0), ("notes.txt", 1), ("user:prefs.json", 0), ("user:prefs.json", 1)]


def test_import_keeps_identical_user_artifacts_and_appends_missing_ones(
    tmp_path: Path, db: Path
) -> None:
    _session_with_user_artifact(db, [b"p0", b"p1"], refer=1)
    dump = tmp_path / "s1.jsonl"
    invoke("export", "s1", "--db", str(db), "--output", str(dump))
    # Same database, new id: the user's versions are already there and identical.
    copy = invoke("import", str(dump), "--db", str(db), "--session-id", "copy", "--json")
    assert copy.exit_code == 0, copy.stderr
    assert orjson.loads(copy.stdout)["artifacts"] == 2  # notes.txt v0, v1; user: ones kept
    assert _snapshot(db, "copy")["artifacts"] == _snapshot(db, "s1")["artifacts"]
    # Another database where the user only has v0: v1 is appended as v1.
    other = tmp_path / "other.db"
    make_session(str(other), [], session_id="mine", artifacts=[("user:prefs.json", b"p0")])
    imported = invoke("import", str(dump), "--db", str(other), "--json")
    assert imported.exit_code == 0, imported.stderr
    assert orjson.loads(imported.stdout)["artifacts"] == 3
    mine = _snapshot(other, "s1")["artifacts"]
    assert [mine[("user:prefs.json", v)][0] for v in (0, 1)] == [b"p0", b"p1"]
    assert invoke("verify", "--db", str(other)).exit_code == 0


def test_import_refuses_to_shadow_a_different_user_artifact(tmp_path: Path, db: Path) -> None:
    _session_with_user_artifact(db, [b"p0"], refer=0)
    dump = tmp_path / "s1.jsonl"
    invoke("export", "s1", "--db", str(db), "--output", str(dump))
    other = tmp_path / "other.db"
    make_session(str(other), [], session_id="mine", artifacts=[("user:prefs.json", b"theirs")])
    result = invoke("import", str(dump), "--db", str(other))
    assert result.exit_code == 1
    assert result.stderr.startswith("evs: error: User artifact 'user:prefs.json' version 0 of "
                                    "user 'ada' (app 'weather') already exists in ")
    assert result.stderr.count("\n") == 1
    assert "s1" not in invoke("sessions", "--db", str(other)).stdout
    assert _snapshot(other, "mine")["artifacts"][("user:prefs.json", 0)][0] == b"theirs"


def test_import_refuses_an_export_with_a_version_gap(tmp_path: Path, db: Path) -> None:
    _session_with_user_artifact(db, [b"p0"], refer=0)
    lines = invoke("export", "s1", "--db", str(db)).stdout_bytes.splitlines()
    header = orjson.loads(lines[0])
    header["artifacts"] -= 1
    gapped = [orjson.dumps(header), *(line for line in lines[1:] if b'"notes.txt","version":0'
                                      not in line)]
    dump = tmp_path / "gap.jsonl"
    dump.write_bytes(b"\n".join(gapped) + b"\n")
    result = invoke("import", str(dump), "--db", str(db), "--session-id", "gap")
    assert result.exit_code == 1
    assert ("artifact 'notes.txt' has version 1 but lacks version(s) 0; versions must be 0..n "
            "without gaps") in result.stderr
    assert "gap" not in invoke("sessions", "--db", str(db)).stdout


def test_import_of_a_version_1_export_without_artifacts(tmp_path: Path, paused_db: Path) -> None:
    lines = invoke("export", "s1", "--db", str(paused_db)).stdout_bytes.splitlines()
    header = orjson.loads(lines[0])
    header["version"] = 1
    del header["artifacts"]
    dump = tmp_path / "v1.jsonl"
    dump.write_bytes(b"\n".join([orjson.dumps(header), *lines[1:]]) + b"\n")
    result = invoke("import", str(dump), "--db", str(paused_db), "--session-id", "old")
    assert result.exit_code == 0, result.stderr
    assert "Imported 9 events into session old" in result.stdout


def test_export_accepts_json_as_a_no_op(paused_db: Path) -> None:
    plain = invoke("export", "s1", "--db", str(paused_db))
    assert invoke("export", "s1", "--db", str(paused_db), "--json").stdout == plain.stdout
    assert plain.stderr == ""


def test_export_to_a_file_says_what_it_wrote(tmp_path: Path, paused_db: Path) -> None:
    dump = tmp_path / "s1.jsonl"
    done = invoke("export", "s1", "--db", str(paused_db), "-o", str(dump))
    assert done.exit_code == 0, done.stderr
    assert done.stdout == f"Exported session s1 (9 events) to {dump}.\n"
    assert done.stderr == ""
    assert len(dump.read_bytes().splitlines()) == 1 + 9
    again = invoke("export", "s1", "--db", str(paused_db), "-o", str(dump), "--json")
    assert orjson.loads(again.stdout) == {"session_id": "s1", "events": 9, "output": str(dump)}


@pytest.mark.parametrize("version", [pytest.param(1, id="missing-version"),
                                     pytest.param(0, id="present")])
def test_verify_flags_artifact_delta_without_the_version(db: Path, version: int) -> None:
    make_session(str(db), [Event(author=AGENT, actions=EventActions(
        artifact_delta={"report.txt": version}))], artifacts=[("report.txt", b"r0")])
    result = invoke("verify", "s1", "--db", str(db), "--json")
    findings = orjson.loads(result.stdout)["findings"]
    if version == 0:
        assert (result.exit_code, findings) == (0, [])
    else:
        assert result.exit_code == 3
        assert findings == [{
            "session_id": "s1", "seq": 1, "code": "artifact_missing",
            "message": "artifact_delta names artifact 'report.txt' version 1, which does not "
            "exist (the stored versions are 0)."}]


def test_export_reads_the_log_in_pages_and_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventstore import _export

    source = tmp_path / "source.db"
    sid = _demo_session(source)
    whole = invoke("export", sid, "--db", str(source))
    assert whole.exit_code == 0, whole.stderr
    pages: list[int] = []
    monkeypatch.setattr(_export, "EXPORT_PAGE", 3)
    original = _export.decode_all

    def counting(rows: Any) -> Any:
        pages.append(len(rows))
        return original(rows)

    monkeypatch.setattr(_export, "decode_all", counting)
    dump = tmp_path / "paged.jsonl"
    paged = invoke("export", sid, "--db", str(source), "-o", str(dump))
    assert paged.exit_code == 0, paged.stderr
    assert dump.read_bytes() == whole.stdout_bytes
    assert pages
    assert max(pages) == 3
    assert sum(pages) == len(dump.read_bytes().splitlines()) - 2
    target = tmp_path / "target.db"
    assert invoke("import", str(dump), "--db", str(target)).exit_code == 0
    assert _snapshot(target, sid)["payloads"] == _snapshot(source, sid)["payloads"]


def test_export_to_a_missing_directory_names_it_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    sid = _demo_session(source)
    missing = tmp_path / "no" / "such" / "x.jsonl"
    result = invoke("export", sid, "--db", str(source), "-o", str(missing))
    assert result.exit_code == 1
    assert f"the directory {missing.parent} does not exist" in result.stderr
    assert "internal error" not in result.stderr
    gone = invoke("export", "nope", "--db", str(source), "-o", str(tmp_path / "y.jsonl"))
    assert gone.exit_code == 1
    assert "does not exist" in gone.stderr
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("source.db")] == []


def test_import_refuses_an_integer_it_would_read_as_a_float(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    sid = _demo_session(source)
    lines = invoke("export", sid, "--db", str(source)).stdout_bytes.splitlines()
    header = orjson.loads(lines[0])
    header.pop("chain", None)  # the edit below breaks the chain; --force is the point
    event = orjson.loads(lines[1])
    event["custom_metadata"] = {"ticket": "123456789012345678901234567890", "n": 7}
    lines[0] = orjson.dumps(header)
    # 23 digits: orjson would read it as 1.2345678901234568e+22, a silently changed value.
    lines[1] = orjson.dumps(event).replace(b'"n":7', b'"n":12345678901234567890123')
    dump = tmp_path / "big.jsonl"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    target = tmp_path / "target.db"
    for extra in ([], ["--force"]):
        result = invoke("import", str(dump), "--db", str(target), *extra)
        assert result.exit_code == 1, result.stdout
        assert "line 2" in result.stderr
        assert "12345678901234567890123 (23 digits)" in result.stderr
    if target.exists():
        listed = orjson.loads(invoke("sessions", "--db", str(target), "--json").stdout)
        assert listed["sessions"] == []
    # A long run of digits inside a string is not a number: it imports unchanged.
    lines[1] = orjson.dumps(event)
    dump.write_bytes(b"\n".join(lines) + b"\n")
    ok = invoke("import", str(dump), "--db", str(target), "--force")
    assert ok.exit_code == 0, ok.stderr
