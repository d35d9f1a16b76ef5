"""One truth for where a call stands: ``evs show``, ``evs web``'s timeline, ``evs pending``,
``evs rerun`` and ``evs respond`` read a call the same way, and speak in ``evs`` commands."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from _cli_support import invoke

from eventstore import Event

_FUNCTION = re.compile(r"\b[a-z_]+\(\)|\b(pending|answer_confirmation|submit_response|"
                       r"rerun_call)\(")


def _show_entry(db: Path, call_id: str) -> dict[str, object]:
    events = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)["events"]
    [entry] = [c for e in events for c in e["calls"] if c["id"] == call_id and "status" in c]
    return entry


def _web_status(db: Path, call_id: str) -> tuple[str, str]:
    from eventstore import open_store
    from eventstore.commands import run
    from runtime.web._view import Row, pair

    async def read() -> list[Event]:
        async with await open_store(str(db)) as store:
            return await store.read("s1")

    rows = [Row(seq=e.seq or 0, stored=None, event=e)  # type: ignore[arg-type]
            for e in run(read())]
    pair(rows, rows)
    [status] = [(c["status"], c["status_text"]) for r in rows for c in r.entry["calls"]
                if c["id"] == call_id and "status" in c]
    return tuple(status)


@pytest.mark.parametrize(("answer", "status", "kind"), [
    pytest.param("--yes", "confirmed_not_run", "confirmed_not_run", id="approved"),
    pytest.param("--no", "rejected_not_run", "rejected_not_run", id="rejected"),
])
def test_answered_confirmation_reads_the_same_everywhere(
    paused_db: Path, answer: str, status: str, kind: str
) -> None:
    assert invoke("confirm", "s1", "confirm-1", answer, "--db", str(paused_db)).exit_code == 0
    pending = orjson.loads(invoke("pending", "s1", "--db", str(paused_db), "--json").stdout)
    assert [p["kind"] for p in pending["pending"] if p["call_id"] == "c3"] == [kind]

    entry = _show_entry(paused_db, "c3")
    assert entry["status"] == status
    shown = invoke("show", "s1", "--db", str(paused_db)).stdout
    assert "in doubt" not in shown
    words = ("confirmed, not run yet" if answer == "--yes" else "rejected: the agent's next run "
             "answers it with the rejection")
    assert words in shown
    assert words in str(entry["status_text"])
    assert _web_status(paused_db, "c3") == (status, entry["status_text"])

    rerun = invoke("rerun", "s1", "c3", "--force", "--db", str(paused_db))
    respond = invoke("respond", "s1", "c3", "--result", "{}", "--db", str(paused_db))
    for refused in (rerun, respond):
        assert refused.exit_code == 1
        assert len(refused.stderr.splitlines()) == 1
        assert "already answered" not in refused.stderr
        assert "waits for a confirmation" not in refused.stderr
        assert not _FUNCTION.search(refused.stderr), refused.stderr
        assert "confirm-1" in refused.stderr
        assert "the agent's next run" in refused.stderr
        assert f"evs pending --db {paused_db} s1" in refused.stderr


def test_open_confirmation_is_answered_with_evs_confirm(paused_db: Path) -> None:
    assert _show_entry(paused_db, "c3")["status"] == "awaiting_confirmation"
    for command in (["rerun", "s1", "c3", "--force"], ["respond", "s1", "c3", "--result", "{}"]):
        refused = invoke(*command, "--db", str(paused_db))
        assert refused.exit_code == 1
        assert f"evs confirm --db {paused_db} s1 confirm-1 --yes" in refused.stderr
        assert not _FUNCTION.search(refused.stderr), refused.stderr


def test_library_sentences_become_whole_commands() -> None:
    from runtime.cli._words import command_words

    said = command_words("It did not run: answer it with answer_confirmation(session_id='s 1', "
                         "confirmation_id='confirm-1', confirmed=…). Or rerun_call(call_id='c').")
    assert said == ("It did not run: answer it with `evs confirm 's 1' confirm-1 --yes|--no`. "
                    "Or evs rerun.")
