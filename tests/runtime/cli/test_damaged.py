"""Every command against hand-damaged databases, through the real entry point
(``runtime.cli.main``, what the ``evs`` script runs): never a traceback, damage named.

Each damage is what a user with ``sqlite3`` (or a crashed tool) can do to a file: a payload or a
snapshot stored as TEXT, bytes that are not JSON, JSON of the wrong shape, a gap, a repeated seq,
a second answer, a missing artifact version, a schema from a newer version, tables without
``alembic_version``, a file that is no database.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from _cli_support import invoke

import runtime.cli
from eventstore import Content, Event, FunctionResponse, Part

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

Damage = Callable[[Path, str], None]


def _sql(*statements: str) -> Damage:
    def damage(db: Path, session_id: str) -> None:
        with sqlite3.connect(db) as conn:
            for statement in statements:
                conn.execute(statement.replace("$S", session_id))

    return damage


def _second_answer(db: Path, session_id: str) -> None:
    from _cli_support import build

    async def work(store: object) -> None:
        from eventstore import EventStore

        assert isinstance(store, EventStore)
        answer = Event(author="user", content=Content(role="user", parts=(Part(
            function_response=FunctionResponse(id="call-paris", name="get_weather",
                                               response={"temperature_c": 99})),)))
        await store.append(session_id, answer, expected_version=None)

    build(str(db), work)


def _not_a_database(db: Path, session_id: str) -> None:
    db.write_bytes(b"this is not a database, just text\n" * 100)


_HASH_AT_4 = "(SELECT chain_hash FROM evs_events WHERE session_id = '$S' AND seq = 4)"

DAMAGES: dict[str, tuple[Damage, str | None]] = {
    # name: (damage, what verify must name; None when the database cannot be opened at all)
    "payload-text": (_sql("UPDATE evs_events SET payload = CAST(payload AS TEXT) "
                          "WHERE seq = 3"), "undecodable"),
    "payload-replace": (_sql("UPDATE evs_events SET payload = replace(payload, 'Paris', "
                             "'Lyon') WHERE seq = 2"), "undecodable"),
    "payload-not-json": (_sql("UPDATE evs_events SET payload = X'00FF10' WHERE seq = 4"),
                         "undecodable"),
    "payload-wrong-shape": (_sql("UPDATE evs_events SET payload = CAST('[1, 2]' AS BLOB) "
                                 "WHERE seq = 5"), "undecodable"),
    "payload-integer": (_sql("UPDATE evs_events SET payload = 42 WHERE seq = 6"),
                        "undecodable"),
    # Bound to the event at seq 4 (revision 0020), as the store writes them: in use.
    "snapshot-text": (_sql("INSERT INTO evs_snapshots (session_id, seq, state, chain_hash) "
                           "VALUES ('$S', 4, '{\"last_city\": \"Paris\"}', " + _HASH_AT_4 + ")"),
                      "snapshot_undecodable"),
    "snapshot-not-json": (_sql("INSERT INTO evs_snapshots (session_id, seq, state, chain_hash) "
                               "VALUES ('$S', 4, X'7B7B', " + _HASH_AT_4 + ")"),
                          "snapshot_undecodable"),
    "gap": (_sql("DELETE FROM evs_events WHERE seq = 9"), "seq_gap"),
    "repeated-seq": (_sql("UPDATE evs_events SET seq = 5 WHERE seq = 6"), "seq_order"),
    "swapped-seq": (_sql("UPDATE evs_events SET seq = 7 - seq WHERE seq IN (3, 4)"),
                    "chain_reordered"),
    "answered-twice": (_second_answer, "answered_twice"),
    "artifact-missing": (_sql("DELETE FROM evs_artifacts"), "artifact_missing"),
    "kind-changed": (_sql("UPDATE evs_events SET kind = 'mystery' WHERE seq = 2"),
                     "kind_mismatch"),
    "newer-schema": (_sql("UPDATE alembic_version SET version_num = '9999'"), None),
    "no-alembic-version": (_sql("DROP TABLE alembic_version"), None),
    "not-a-database": (_not_a_database, None),
}


def commands(session_id: str) -> list[list[str]]:
    """Every command a user may try on the damaged session."""
    s = session_id
    return [
        ["sessions"],
        ["sessions", "--json"],
        ["show", s],
        ["show", s, "--json"],
        ["show", s, "--raw"],
        ["show", s, "--last", "3"],
        ["state", s],
        ["state", s, "--at", "3"],
        ["state", s, "--json"],
        ["pending", s],
        ["pending", s, "--json"],
        ["verify"],
        ["verify", s, "--json"],
        ["export", s],
        ["tail", s, "--after", "0", "--timeout", "0.2"],
        ["db", "current"],
        ["confirm", s, "call-forecast", "--yes"],
        ["respond", s, "call-outlook", "--result", '{"outlook": "sunny"}'],
        ["rerun", s, "call-outlook"],
        ["demo", "--resume", s],
        ["delete", s, "--yes"],
    ]


def run_evs(args: list[str], capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run ``evs ARGS`` through the console script's entry point, in-process."""
    monkeypatch.setattr(sys, "argv", ["evs", *args])
    try:
        runtime.cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    else:  # pragma: no cover - main always exits
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def finished_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A SQLite file holding one finished demo session (with an artifact)."""
    db = tmp_path_factory.mktemp("damaged") / "clean.db"
    assert invoke("demo", "--approve", "--db", str(db)).exit_code == 0
    [session] = orjson.loads(invoke("sessions", "--db", str(db), "--json").stdout)["sessions"]
    return db, str(session["id"])


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_database_never_shows_a_traceback(
    damage: str, finished_demo: tuple[Path, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean, session_id = finished_demo
    damaged, expected = DAMAGES[damage]
    for args in commands(session_id):
        db = tmp_path / f"{args[0]}.db"
        shutil.copyfile(clean, db)
        damaged(db, session_id)
        code, out, err = run_evs([*args, "--db", str(db)], capsys, monkeypatch)
        where = f"evs {' '.join(args)} on {damage}: exit {code}\n{out}\n{err}"
        assert "Traceback" not in out + err, where
        assert "internal error" not in err, where
        assert code in (0, 1, 3), where
        if code == 1:
            if args[0] == "tail":  # it says what it follows before it reads
                err = "".join(line for line in err.splitlines(keepends=True)
                              if not line.startswith("following "))
            assert err.startswith("evs: error: "), where
            assert len(err.splitlines()) == 1, where
        if args[0] == "verify":
            assert code == (3 if expected else 1), where
            if expected:
                assert expected in out, where
        db.unlink()


@pytest.mark.parametrize("damage", ["payload-text", "payload-not-json", "snapshot-text"])
def test_undecodable_rows_are_named_by_session_and_seq(
    damage: str, finished_demo: tuple[Path, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean, session_id = finished_demo
    db = tmp_path / "evs.db"
    shutil.copyfile(clean, db)
    DAMAGES[damage][0](db, session_id)
    seq = {"payload-text": 3, "payload-not-json": 4, "snapshot-text": 4}[damage]
    code, out, _ = run_evs(["verify", "--db", str(db), "--json"], capsys, monkeypatch)
    assert code == 3
    findings = orjson.loads(out)["findings"]
    # A payload edited by hand also breaks the hash chain there (revision 0008).
    chain = [f for f in findings if f["code"] == "chain_edited"]
    [finding] = [f for f in findings if f["code"] != "chain_edited"]
    assert (finding["session_id"], finding["seq"]) == (session_id, seq)
    assert [f["seq"] for f in chain] == ([seq] if damage == "payload-not-json" else [])
    readers = [["state", session_id]]
    if damage != "snapshot-text":  # only state reads snapshots
        readers += [["export", session_id], ["pending", session_id]]
    for args in readers:
        code, _, err = run_evs([*args, "--db", str(db)], capsys, monkeypatch)
        assert code == 1
        assert f"{seq}" in err
        assert repr(session_id) in err
        assert "cannot be decoded" in err


def test_rebuild_snapshots_repairs_an_undecodable_snapshot(
    finished_demo: tuple[Path, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean, session_id = finished_demo
    db = tmp_path / "evs.db"
    shutil.copyfile(clean, db)
    DAMAGES["snapshot-text"][0](db, session_id)
    code, _, err = run_evs(["state", session_id, "--db", str(db)], capsys, monkeypatch)
    assert code == 1
    assert "evs db rebuild-snapshots drops them" in err
    code, out, _ = run_evs(["db", "rebuild-snapshots", "--db", str(db)], capsys, monkeypatch)
    assert code == 0
    assert out == "Dropped 1 snapshot(s); state reads rebuild them from the log.\n"
    assert run_evs(["verify", "--db", str(db)], capsys, monkeypatch)[0] == 0
    code, out, _ = run_evs(["state", session_id, "--db", str(db), "--json"], capsys,
                           monkeypatch)
    assert orjson.loads(out)["state"] == {"last_city": "Paris", "forecast_cost_usd": 0.05}
