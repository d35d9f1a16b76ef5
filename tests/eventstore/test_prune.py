"""``EventStore.prune`` and the retention policies, on memory, SQLite and PostgreSQL: old
sessions are archived (the ``evs export`` format, read back equal to the log) and then deleted;
a dry run writes nothing; a session appended to while it is archived is kept; the conditional
delete refuses a stale version; policies are stored per app and applied by
``prune_by_policy``."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from pathlib import Path

import pytest
from _evs_support import call_event, delta_event, response_event, text_event

import eventstore.store.retention as store_retention
from eventstore import (
    ArchiveError,
    ConcurrencyError,
    Event,
    EventStore,
    RetentionPolicy,
    StoreUsageError,
)
from eventstore._archive import archive_name
from eventstore._exchange import parse_export

DAY = 86_400.0
NOW = 1_800_000_000.0


async def _session(store: EventStore, sid: str, *, age_days: float, app: str = "app",
                   user: str = "u", events: int = 3) -> None:
    """A session whose every event (and creation) is ``age_days`` before NOW."""
    when = NOW - age_days * DAY
    await store.create_session(app_name=app, user_id=user, session_id=sid, created_at=when)
    batch = [text_event(f"m{i}") for i in range(events - 2)]
    batch += [call_event(f"{sid}-c"), response_event(f"{sid}-c")]
    await store.append(sid, [_at(e, when) for e in batch], expected_version=0)


def _bytes(path: str | None) -> bytes:
    assert path is not None
    return Path(path).read_bytes()


def _at(event: Event, when: float) -> Event:
    return dataclasses.replace(event, timestamp=when)


async def test_prune_archives_then_deletes_only_old_sessions(store: EventStore,
                                                            tmp_path: Path) -> None:
    await _session(store, "old-1", age_days=40)
    await _session(store, "old-2", age_days=31, app="other")
    await _session(store, "new", age_days=2)
    await store.save_artifact("old-1", "notes.txt", b"n0", mime_type="text/plain")
    before = await store.read("old-1")
    report = await store.prune(older_than=timedelta(days=30), archive=tmp_path / "arch",
                               now=NOW)
    assert [(s.session_id, s.outcome) for s in report.sessions] == [
        ("old-1", "deleted"), ("old-2", "deleted")]
    assert report.events_deleted == 6
    assert (await store.list_sessions()).sessions[0].id == "new"
    assert len((await store.list_sessions()).sessions) == 1
    first = report.sessions[0]
    assert first.archive == str(tmp_path / "arch" / "app" / "old-1.jsonl")
    data = _bytes(first.archive)
    assert first.archive_bytes == len(data)
    assert report.archive_bytes == len(data) + report.sessions[1].archive_bytes
    parsed = parse_export(data.splitlines())
    assert [e.id for e in parsed.events] == [e.id for e in before]
    assert [(a.filename, a.version, a.data) for a in parsed.artifacts] == [
        ("notes.txt", 0, b"n0")]
    assert not list((tmp_path / "arch").rglob("*.partial"))


async def test_prune_of_one_app_and_dry_run_write_nothing(store: EventStore,
                                                         tmp_path: Path) -> None:
    await _session(store, "a-old", age_days=40)
    await _session(store, "b-old", age_days=40, app="other")
    dry = await store.prune(older_than=30 * DAY, archive=tmp_path / "arch", app_name="app",
                            dry_run=True, now=NOW)
    assert dry.dry_run
    assert [(s.session_id, s.outcome, s.archive) for s in dry.sessions] == [
        ("a-old", "would_delete", None)]
    assert not (tmp_path / "arch").exists()
    assert len((await store.list_sessions()).sessions) == 2
    done = await store.prune(older_than=30 * DAY, archive=None, app_name="app", now=NOW)
    assert [s.outcome for s in done.sessions] == ["deleted"]
    assert done.archive_bytes == 0
    assert [s.id for s in (await store.list_sessions()).sessions] == ["b-old"]


async def test_a_session_appended_to_while_archived_is_kept(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _session(store, "busy", age_days=40)
    await _session(store, "idle", age_days=41)
    real = store_retention.write_archive

    async def archive_then_append(backend, record, directory):  # type: ignore[no-untyped-def]
        written = await real(backend, record, directory)
        if record.session_id == "busy":  # another writer, between the archive and the delete
            await store.append("busy", text_event("late"), expected_version=record.version)
        return written

    monkeypatch.setattr(store_retention, "write_archive", archive_then_append)
    report = await store.prune(older_than=30 * DAY, archive=tmp_path, now=NOW)
    assert [(s.session_id, s.outcome) for s in report.sessions] == [
        ("idle", "deleted"), ("busy", "kept_changed")]
    assert await store.version("busy") == 4
    kept = parse_export(_bytes(report.sessions[1].archive).splitlines())
    assert len(kept.events) == 3  # the archive is what was archived; the session lives on


async def test_conditional_delete_refuses_a_stale_version(store: EventStore) -> None:
    await _session(store, "s", age_days=1)
    with pytest.raises(ConcurrencyError) as caught:
        await store.backend.delete_session("s", expected_version=2)
    assert (caught.value.expected_version, caught.value.actual_version) == (2, 3)
    assert "nothing was deleted" in str(caught.value)
    assert await store.version("s") == 3
    assert await store.backend.delete_session("s", expected_version=3)
    assert not await store.backend.delete_session("s", expected_version=3)


async def test_an_archive_never_replaces_another(store: EventStore, tmp_path: Path) -> None:
    await _session(store, "s", age_days=40, events=3)
    first = (await store.prune(older_than=DAY, archive=tmp_path, now=NOW)).sessions[0]
    await _session(store, "s", age_days=40, events=4)  # the same id, another log
    second = (await store.prune(older_than=DAY, archive=tmp_path, now=NOW)).sessions[0]
    assert first.archive == str(tmp_path / "app" / "s.jsonl")
    assert second.archive == str(tmp_path / "app" / "s.1.jsonl")
    sizes = [len(parse_export(_bytes(p).splitlines()).events)
             for p in (first.archive, second.archive)]
    assert sizes == [3, 4]


async def test_an_archive_that_cannot_be_written_keeps_the_session(
    store: EventStore, tmp_path: Path
) -> None:
    await _session(store, "s", age_days=40)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ArchiveError) as caught:
        await store.prune(older_than=DAY, archive=blocker, now=NOW)
    assert caught.value.session_id == "s"
    assert "was not deleted" in str(caught.value)
    assert await store.version("s") == 3


@pytest.mark.parametrize("name", ["plain", "a/b", "..", ".hidden", "%41", "x" * 300, "é\n"])
def test_archive_names_are_one_safe_component(name: str) -> None:
    escaped = archive_name(name)
    assert "/" not in escaped
    assert "\n" not in escaped
    assert not escaped.startswith(".")
    assert 0 < len(escaped) <= 200
    assert archive_name(name + "y") != escaped


async def test_prune_arguments_are_checked(store: EventStore) -> None:
    with pytest.raises(StoreUsageError):
        await store.prune(older_than=0, archive=None)
    with pytest.raises(StoreUsageError):
        await store.prune(older_than=DAY, archive=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.prune(older_than=DAY)  # type: ignore[call-arg]  # archive must be said


async def test_retention_policies_crud_and_prune_by_policy(store: EventStore,
                                                          tmp_path: Path) -> None:
    assert await store.retention_policies() == []
    set_a = await store.set_retention(app_name="a", older_than=timedelta(days=30),
                                      archive=tmp_path / "a-arch")
    assert isinstance(set_a, RetentionPolicy)
    assert set_a.archive == str(tmp_path / "a-arch")
    await store.set_retention(app_name="b", older_than=7 * DAY)
    await store.set_retention(app_name="c", older_than=DAY)
    await store.set_retention(app_name="c", older_than=2 * DAY)  # replaces
    policies = await store.retention_policies()
    assert [(p.app_name, p.older_than, p.archive) for p in policies] == [
        ("a", 30 * DAY, str(tmp_path / "a-arch")), ("b", 7 * DAY, None), ("c", 2 * DAY, None)]
    assert abs(policies[0].set_at - time.time()) < 60
    assert await store.clear_retention(app_name="c") == 1
    assert await store.clear_retention(app_name="c") == 0

    await _session(store, "a-40", app="a", age_days=40)
    await _session(store, "a-20", app="a", age_days=20)
    await _session(store, "b-10", app="b", age_days=10)
    await _session(store, "b-5", app="b", age_days=5)
    await _session(store, "z-99", app="z", age_days=99)  # no policy: never pruned by policy
    report = await store.prune_by_policy(archive=tmp_path / "default", now=NOW)
    assert [(s.session_id, s.outcome) for s in report.sessions] == [
        ("a-40", "deleted"), ("b-10", "deleted")]
    assert report.sessions[0].archive == str(tmp_path / "a-arch" / "a" / "a-40.jsonl")
    assert report.sessions[1].archive == str(tmp_path / "default" / "b" / "b-10.jsonl")
    left = {s.id for s in (await store.list_sessions()).sessions}
    assert left == {"a-20", "b-5", "z-99"}
    assert await store.clear_retention() == 2
    assert await store.retention_policies() == []


async def test_pruning_keeps_the_users_shared_state(store: EventStore, tmp_path: Path) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="old",
                               created_at=NOW - 40 * DAY)
    await store.append("old", _at(delta_event({"user:name": "Ada", "app:tier": "gold"}),
                                  NOW - 40 * DAY), expected_version=0)
    await store.create_session(app_name="app", user_id="u", session_id="new",
                               created_at=NOW - DAY)
    await store.prune(older_than=30 * DAY, archive=tmp_path, now=NOW)
    assert [s.id for s in (await store.list_sessions()).sessions] == ["new"]
    assert await store.shared_state(app_name="app", user_id="u") == {
        "user:name": "Ada", "app:tier": "gold"}
