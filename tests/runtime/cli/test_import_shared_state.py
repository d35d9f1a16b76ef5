"""What ``evs import`` does with the ``user:``/``app:`` state changes of the events it imports:
they count once. Imported into a database whose shared-state streams already hold them (the
session lives there, lived there, or was exported from it), the session is a copy, as ``evs
fork`` makes: its log keeps every delta byte for byte, the user's and app's current state is
left as it is, and ``evs verify`` finds nothing. Imported anywhere else they are applied.
On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from _cli_support import AGENT, invoke, make_session, text

from eventstore import Content, Event, EventActions, open_store


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "evs.db")
    url = str(request.getfixturevalue("empty_postgres_url"))
    assert invoke("db", "upgrade", "--db", url).exit_code == 0
    return url


def _sets(value: str, **extra: Any) -> Event:
    return Event(author=AGENT, content=Content(role="model", parts=(text(f"{value}."),)),
                 actions=EventActions(state_delta={"user:theme": value, **extra}))


def _state(url: str, session_id: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with await open_store(url) as store:
            return await store.state(session_id)

    return asyncio.run(read())


def _old_session_then_newer_state(db: str, tmp_path: Path) -> Path:
    """s1 set user:theme dark and app:motd old; s2, later, set them to light and new; s1's
    export."""
    make_session(db, [_sets("dark", **{"app:motd": "old"})], session_id="s1")
    make_session(db, [_sets("light", **{"app:motd": "new"})], session_id="s2")
    dump = tmp_path / "s1.jsonl"
    assert invoke("export", "s1", "--db", db, "-o", str(dump)).exit_code == 0
    return dump


def _verify_clean(db: str, session_id: str | None = None) -> None:
    result = invoke("verify", *([session_id] if session_id else []), "--db", db, "--json")
    assert result.exit_code == 0, result.stdout
    assert orjson.loads(result.stdout)["findings"] == []


def test_a_copy_imported_beside_its_origin_leaves_shared_state_alone(db: str,
                                                                      tmp_path: Path) -> None:
    dump = _old_session_then_newer_state(db, tmp_path)
    result = invoke("import", str(dump), "--db", db, "--session-id", "copy")
    assert result.exit_code == 0, result.stderr
    state = _state(db, "copy")
    assert (state["user:theme"], state["app:motd"]) == ("light", "new")  # not set back
    events = invoke("export", "copy", "--db", db).stdout_bytes.splitlines()
    assert events[1:] == dump.read_bytes().splitlines()[1:]  # the deltas are in its log
    shown = orjson.loads(invoke("show", "copy", "--db", db, "--json").stdout)
    assert shown["links"]["forked_from"] == {"session_id": "s1", "seq": 1, "exists": True}
    _verify_clean(db, "copy")
    _verify_clean(db)


def test_a_deleted_session_imported_back_leaves_shared_state_alone(db: str,
                                                                    tmp_path: Path) -> None:
    dump = _old_session_then_newer_state(db, tmp_path)
    assert invoke("delete", "s1", "--db", db, "--yes").exit_code == 0
    result = invoke("import", str(dump), "--db", db)
    assert result.exit_code == 0, result.stderr
    assert _state(db, "s1")["user:theme"] == "light"
    assert _state(db, "s2")["user:theme"] == "light"
    _verify_clean(db)


def test_an_import_into_another_database_applies_the_changes(db: str, tmp_path: Path) -> None:
    source = str(tmp_path / "source.db")
    dump = _old_session_then_newer_state(source, tmp_path)
    result = invoke("import", str(dump), "--db", db)
    assert result.exit_code == 0, result.stderr
    state = _state(db, "s1")
    assert (state["user:theme"], state["app:motd"]) == ("dark", "old")
    _verify_clean(db)
