"""``evs prune`` and ``evs retention``: archives re-import to identical logs (events, state,
artifacts, a chain ``evs verify`` accepts), ``--dry-run`` writes nothing, no deletion without
``--archive`` or an explicit ``--no-archive``, policies stored per app and applied; on SQLite
and PostgreSQL."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from _cli_support import (
    FINISHING_ARTIFACTS,
    build,
    file_fingerprint,
    finishing_log,
    invoke,
    paused_weather_log,
)

from eventstore import EventStore
from eventstore.commands._retention_cmds import format_duration, parse_duration

DAY = 86_400.0


def _old_session(url: str, session_id: str, *, days: float, app: str = "weather") -> None:
    """A session of the weather logs whose creation and events are ``days`` old."""
    when = time.time() - days * DAY
    events = [dataclasses.replace(e, timestamp=when + i)
              for i, e in enumerate(paused_weather_log() + finishing_log())]

    async def work(store: EventStore) -> None:
        await store.create_session(app_name=app, user_id="ada", session_id=session_id,
                                   state={"units": "metric", "user:units": "metric"},
                                   created_at=when)
        await store.append(session_id, events, expected_version=1)
        for filename, data in FINISHING_ARTIFACTS:  # the log refers to them
            await store.save_artifact(session_id, filename, data, mime_type="text/plain")

    build(url, work)


def _observed(url: str, session_id: str) -> dict[str, Any]:
    async def work(store: EventStore) -> dict[str, Any]:
        artifacts = await store.list_artifacts(session_id)
        info = await store.session_info(session_id)
        return {
            "events": await store.read(session_id),
            "state": await store.state(session_id),
            "artifacts": {name: [(await store.load_artifact(session_id, name, version=v)).data
                                 for v in versions] for name, versions in artifacts.items()},
            "info": (info.app_name, info.user_id, info.created_at, info.version),
        }

    return build(url, work)


def _ids(url: str) -> list[str]:
    listed = orjson.loads(invoke("sessions", "--db", url, "--json", "--sort", "id").stdout)
    return [s["id"] for s in listed["sessions"]]


def _archives_reimport_identical(url: str, archive: Path) -> None:
    _old_session(url, "old", days=40)
    _old_session(url, "older", days=50, app="other")
    _old_session(url, "fresh", days=1)
    before = {sid: _observed(url, sid) for sid in ("old", "older")}
    pruned = invoke("prune", "--older-than", "30d", "--archive", str(archive), "--db", url,
                    "--json")
    assert pruned.exit_code == 0, pruned.stderr
    report = orjson.loads(pruned.stdout)
    assert [(s["session_id"], s["outcome"]) for s in report["sessions"]] == [
        ("older", "deleted"), ("old", "deleted")]
    assert report["deleted"] == 2
    assert report["archive_bytes"] == sum(Path(s["archive"]).stat().st_size
                                          for s in report["sessions"])
    assert _ids(url) == ["fresh"]
    for entry in report["sessions"]:
        imported = invoke("import", entry["archive"], "--db", url)
        assert imported.exit_code == 0, imported.stderr
    assert invoke("verify", "--db", url).exit_code == 0
    for sid, seen in before.items():
        assert _observed(url, sid) == seen


def test_archives_reimport_to_identical_logs_sqlite(tmp_path: Path) -> None:
    _archives_reimport_identical(str(tmp_path / "evs.db"), tmp_path / "archive")


@pytest.mark.postgres
def test_archives_reimport_to_identical_logs_postgres(empty_postgres_url: str,
                                                      tmp_path: Path) -> None:
    assert invoke("db", "upgrade", "--db", empty_postgres_url).exit_code == 0
    _archives_reimport_identical(empty_postgres_url, tmp_path / "archive")


def test_dry_run_lists_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "evs.db"
    _old_session(str(db), "old", days=40)
    _old_session(str(db), "fresh", days=1)
    before = file_fingerprint(db)
    files = sorted(p.name for p in tmp_path.iterdir())
    dry = invoke("prune", "--older-than", "30d", "--archive", str(tmp_path / "a"), "--dry-run",
                 "--db", str(db))
    assert dry.exit_code == 0, dry.stderr
    assert "would delete: old (app weather, user ada, 14 events" in dry.stdout
    assert "fresh" not in dry.stdout
    assert "nothing was written" in dry.stdout
    assert file_fingerprint(db) == before  # the file, its mtime and an empty WAL
    assert not (tmp_path / "a").exists()
    # A read-only WAL reader may leave the -wal/-shm files (every read command does).
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix not in (".db-wal", ".db-shm")
                  ) == files
    assert _ids(str(db)) == ["fresh", "old"]


def test_prune_without_an_archive_is_refused_unless_said(tmp_path: Path) -> None:
    db = str(tmp_path / "evs.db")
    _old_session(db, "old", days=40)
    refused = invoke("prune", "--older-than", "30d", "--db", db)
    assert refused.exit_code == 2
    assert "--archive DIR" in refused.stderr
    assert "--no-archive" in refused.stderr
    assert _ids(db) == ["old"]
    both = invoke("prune", "--older-than", "30d", "--archive", "x", "--no-archive", "--db", db)
    assert both.exit_code == 2
    done = invoke("prune", "--older-than", "30d", "--no-archive", "--db", db)
    assert done.exit_code == 0, done.stderr
    assert "Deleted 1 session(s), 14 events; 0 bytes of archives written." in done.stdout
    assert _ids(db) == []


@pytest.mark.parametrize("text", ["", "30", "d", "-3d", "0d", "3 days", "1x", "12h3"])
def test_bad_durations_are_usage_errors(tmp_path: Path, text: str) -> None:
    result = invoke("prune", "--older-than", text, "--no-archive", "--db",
                    str(tmp_path / "evs.db"))
    assert result.exit_code == 2
    assert "--older-than takes a duration such as 30d" in result.stderr


@pytest.mark.parametrize(("text", "seconds"), [("30d", 30 * DAY), ("12h", 43_200),
                                               ("1d12h", 1.5 * DAY), ("2w", 14 * DAY),
                                               ("90m", 5_400), ("45s", 45), ("1.5h", 5_400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--older-than") == seconds
    assert parse_duration(format_duration(seconds), "--older-than") == seconds


def test_retention_set_show_clear_and_prune_by_policy(tmp_path: Path) -> None:
    db = str(tmp_path / "evs.db")
    _old_session(db, "w-40", days=40)
    _old_session(db, "w-10", days=10)
    _old_session(db, "n-10", days=10, app="news")
    _old_session(db, "z-99", days=99, app="zoo")
    assert "No retention policy is stored" in invoke("retention", "show", "--db", db).stdout
    no_policy = invoke("prune", "--db", db, "--archive", str(tmp_path / "a"))
    assert no_policy.exit_code == 1
    assert "No retention policy is stored" in no_policy.stderr
    set_w = invoke("retention", "set", "--app", "weather", "--older-than", "30d", "--archive",
                   str(tmp_path / "weather-archive"), "--db", db)
    assert set_w.exit_code == 0, set_w.stderr
    assert "sessions last updated more than 30d ago are pruned, archived to" in set_w.stdout
    assert invoke("retention", "set", "--app", "news", "--older-than", "1w", "--db",
                  db).exit_code == 0
    shown = orjson.loads(invoke("retention", "show", "--db", db, "--json").stdout)
    assert [(p["app_name"], p["older_than_text"], p["archive"]) for p in shown] == [
        ("news", "7d", None), ("weather", "30d", str(tmp_path / "weather-archive"))]
    lacking = invoke("prune", "--db", db)
    assert lacking.exit_code == 2
    assert "'news' names no archive" in lacking.stderr
    assert _ids(db) == ["n-10", "w-10", "w-40", "z-99"]
    pruned = invoke("prune", "--db", db, "--archive", str(tmp_path / "default"), "--json")
    assert pruned.exit_code == 0, pruned.stderr
    assert [(s["session_id"], Path(s["archive"]).parent.parent.name)
            for s in orjson.loads(pruned.stdout)["sessions"]] == [
        ("n-10", "default"), ("w-40", "weather-archive")]
    assert _ids(db) == ["w-10", "z-99"]
    assert invoke("retention", "clear", "--db", db).exit_code == 2
    assert "Cleared 1 retention policy." in invoke("retention", "clear", "--app", "news",
                                                   "--db", db).stdout
    assert "Cleared 1 retention policy." in invoke("retention", "clear", "--all",
                                                   "--db", db).stdout
    assert orjson.loads(invoke("retention", "show", "--db", db, "--json").stdout) == []
