"""``evs show``, ``evs verify`` and ``evs state`` on a long log cost what they print: counted in
rows the backend reads (a real SQLite file; the counter wraps the backend's read methods)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _cli_support import AGENT, build, call, invoke, response

from eventstore import Content, Event, EventActions, EventStore
from eventstore.backends.sqlite.base import SQLiteBackend
from eventstore.commands._show_pages import SHOW_PAGE

SIZE = 3_000
FAR_CALL = 2_901
"""Seq of a call answered far later (at ``FAR_ANSWER``), across page boundaries."""
FAR_ANSWER = 2_990


def _log() -> list[Event]:
    """``SIZE`` events: a call and its answer every two events, a state change every tenth,
    and one more call (at ``FAR_CALL``) answered far later (at ``FAR_ANSWER``)."""
    events: list[Event] = []
    for seq in range(1, SIZE + 1):
        if seq % 2:
            parts = (call(f"c{seq}", "get_weather", city=f"city {seq}"),)
            if seq == FAR_CALL:
                parts += (call("far", "slow_lookup", city="Oslo"),)
            events.append(Event(author=AGENT, content=Content(role="model", parts=parts)))
        else:
            delta = {"last": seq} if seq % 10 == 0 else {}
            parts = (response(f"c{seq - 1}", "get_weather", temp_c=seq % 30),)
            if seq == FAR_ANSWER:
                parts += (response("far", "slow_lookup", temp_c=3),)
            events.append(Event(author=AGENT, content=Content(role="user", parts=parts),
                                actions=EventActions(state_delta=delta)))
    return events


@pytest.fixture(scope="module")
def long_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "evs.db"

    async def work(store: EventStore) -> None:
        await store.create_session(app_name="app", user_id="u", session_id="s1")
        log, version = _log(), 0
        for start in range(0, SIZE, 500):
            version = (await store.append("s1", log[start:start + 500],
                                          expected_version=version))[-1].seq or 0

    build(str(path), work)
    return path


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows each backend read returned, in order."""
    counts: list[int] = []
    for name in ("read", "read_rows", "read_since"):
        original = getattr(SQLiteBackend, name)

        async def counted(self: SQLiteBackend, *args: Any, _original: Any = original,
                          **kwargs: Any) -> Any:
            rows = await _original(self, *args, **kwargs)
            counts.append(len(rows))
            return rows

        monkeypatch.setattr(SQLiteBackend, name, counted)
    return counts


def test_show_last_reads_only_what_it_prints(long_db: Path, rows_read: list[int]) -> None:
    result = invoke("show", "s1", "--db", str(long_db), "--last", "20")
    assert result.exit_code == 0, result.output
    assert f"#{SIZE - 19} " in result.output
    assert f"#{SIZE - 20} " not in result.output
    # 20 rows, the newest and first rows of the session, the predecessor's hash, and the
    # look back to the calls the shown answers belong to (the far call is 90 events back).
    assert sum(rows_read) <= 20 + 1 + 4 + 1 + SHOW_PAGE, rows_read
    assert sum(rows_read) < SIZE / 10, rows_read


def test_show_last_pairs_an_answer_with_a_call_outside_the_window(
    long_db: Path, rows_read: list[int]
) -> None:
    result = invoke("show", "s1", "--db", str(long_db), "--last", str(SIZE - FAR_ANSWER + 1))
    assert result.exit_code == 0, result.output
    assert f"slow_lookup [far] (call #{FAR_CALL})" in result.output, result.output
    assert "no such call" not in result.output
    assert "response_without_call" not in result.output


def test_show_since_pairs_a_call_with_its_answer_pages_later(
    long_db: Path, rows_read: list[int]
) -> None:
    result = invoke("show", "s1", "--db", str(long_db), "--since", str(FAR_CALL))
    assert result.exit_code == 0, result.output
    call_line = next(line for line in result.output.splitlines() if "[far]" in line
                     and "→" in line)
    assert f"answered at #{FAR_ANSWER}" in call_line, call_line
    assert sum(rows_read) <= (SIZE - FAR_CALL + 1) + 1 + 4 + 1 + SHOW_PAGE, rows_read


def test_show_whole_log_reads_in_pages(long_db: Path, rows_read: list[int]) -> None:
    result = invoke("show", "s1", "--db", str(long_db))
    assert result.exit_code == 0, result.output
    assert "Checked here: the chain of the whole log up to the head record" in result.output
    assert max(rows_read) <= SHOW_PAGE, rows_read
    assert "!" not in result.output, result.output[-2000:]


def test_show_says_what_a_window_leaves_unchecked(long_db: Path) -> None:
    result = invoke("show", "s1", "--db", str(long_db), "--last", "20")
    first = SIZE - 19
    assert (f"the chain of seq {first}..{SIZE} up to the head record, from the stored hash "
            f"of seq {first - 1} on (seq 1..{first - 1} not checked here") in result.output


def _edit_payload(path: Path, seq: int) -> None:
    """Change a stored event's bytes behind the store's back (its hash left as it was)."""
    with sqlite3.connect(path) as conn:
        payload = conn.execute("SELECT payload FROM evs_events WHERE session_id = 's1' AND "
                               "seq = ?", (seq,)).fetchone()[0]
        conn.execute("UPDATE evs_events SET payload = ? WHERE session_id = 's1' AND seq = ?",
                     (bytes(payload).replace(b"city ", b"town "), seq))


def test_show_window_names_an_edit_in_it_and_not_one_before_it(
    long_db: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "edited.db"
    with sqlite3.connect(long_db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    _edit_payload(copy, SIZE - 5)  # in the window
    _edit_payload(copy, 11)  # before it: not read, not claimed
    result = invoke("show", "s1", "--db", str(copy), "--last", "20")
    assert f"chain_edited: seq {SIZE - 5} was changed" in result.output, result.output
    assert "seq 11 " not in result.output
    whole = invoke("verify", "s1", "--db", str(copy))
    assert whole.exit_code == 3, whole.output
    assert "seq 11" in whole.output, whole.output


def test_verify_reads_the_log_in_pages(long_db: Path, rows_read: list[int]) -> None:
    from eventstore.commands._maintain import VERIFY_PAGE

    result = invoke("verify", "s1", "--db", str(long_db))
    assert result.exit_code == 0, result.output
    assert max(rows_read) <= VERIFY_PAGE < SIZE, rows_read
    assert sum(rows_read) >= SIZE


def test_verify_finds_a_break_past_the_first_page(long_db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "edited.db"
    with sqlite3.connect(long_db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    _edit_payload(copy, 2_001)  # the first row of a page
    result = invoke("verify", "s1", "--db", str(copy), "--json")
    assert result.exit_code == 3, result.output
    assert '"code": "chain_edited"' in result.output
    assert '"seq": 2001' in result.output


def test_state_reads_the_log_in_pages(long_db: Path, rows_read: list[int]) -> None:
    from eventstore.commands._inspect import STATE_PAGE

    result = invoke("state", "s1", "--db", str(long_db))
    assert result.exit_code == 0, result.output
    assert f"#{SIZE}" in result.output  # the last state change
    assert max(rows_read) <= STATE_PAGE < SIZE, rows_read
