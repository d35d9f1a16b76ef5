"""The backend contract for artifact seals, on every backend (issue 35: a keyed store serves
no artifact the chain does not vouch for).

Before this, a keyed ``load_artifact`` refused an edited version but served one whose
signature was removed (``artifact_unsigned``: someone who can write the database edits the
bytes, recomputes the unkeyed digest and nulls the signature) or whose digest is NULL
(``artifact_unverified``: saved before revision 0020, or nulled). Now both are refused until an
operator vouches for them (``evs db sign-artifacts``, over ``Backend.store_artifact_seal``),
and unkeyed stores serve every version as before. The edits are raw SQL on SQLite and
PostgreSQL and the memory backend's own data.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _evs_support import BackendTarget
from _tamper import raw

from eventstore import Event, EventActions, EventStore, TamperedArtifactError, open_store
from eventstore._chain import artifact_digest, sign_artifact
from eventstore._export import write_export
from eventstore.backends.memory import MemoryBackend
from eventstore.commands import _sign_artifacts
from eventstore.commands._maintain import verify_session
from eventstore.commands._sign_artifacts import sign_artifacts

KEY = b"s" * 32


@dataclasses.dataclass
class _Place:
    """A test's database and how to edit its artifact rows behind the store's back."""

    target: BackendTarget
    memory: MemoryBackend | None

    @contextlib.asynccontextmanager
    async def store(self, key: bytes | None) -> AsyncIterator[EventStore]:
        """A store on the database, keyed with ``key`` (the memory backend's data is shared
        by re-keying its one backend)."""
        if self.memory is not None:
            self.memory.signing_key = key
            yield EventStore(self.memory)
            return
        async with await open_store(self.target.url, auto_upgrade=True,
                                    signing_key=key) as store:
            yield store

    async def row(self, filename: str, version: int) -> dict[str, Any]:
        """The artifact version's stored columns (data, mime_type, created_at, digest,
        signature)."""
        if self.memory is not None:
            record = next(r for k, rs in self.memory._artifacts.items() if k[3] == filename
                          for r in rs if r.version == version)
            return {"data": record.data, "mime_type": record.mime_type,
                    "created_at": record.created_at, "digest": record.digest,
                    "signature": record.signature}
        ((data, mime, created, digest, signature),) = await raw(
            self.target, "SELECT data, mime_type, created_at, digest, signature FROM "
            "evs_artifacts WHERE filename = ? AND version = ?", filename, version)
        return {"data": bytes(data), "mime_type": mime, "created_at": created,
                "digest": None if digest is None else bytes(digest),
                "signature": None if signature is None else bytes(signature)}

    async def edit(self, filename: str, version: int, **columns: Any) -> None:
        """Set columns (``data``, ``digest``, ``signature``) of one stored version."""
        if self.memory is not None:
            for key, records in self.memory._artifacts.items():
                if key[3] == filename:
                    records[:] = [dataclasses.replace(r, **columns) if r.version == version
                                  else r for r in records]
            return
        sets = ", ".join(f"{name} = ?" for name in columns)
        await raw(self.target, f"UPDATE evs_artifacts SET {sets} WHERE filename = ? "
                  "AND version = ?", *columns.values(), filename, version)

    async def forge(self, filename: str, version: int, data: bytes) -> None:
        """What someone without the key does: new bytes, their digest recomputed (public
        arithmetic), the signature removed."""
        row = await self.row(filename, version)
        digest = artifact_digest(filename, version=version, mime_type=row["mime_type"],
                                 created_at=row["created_at"], metadata=None, data=data)
        await self.edit(filename, version, data=data, digest=digest, signature=None)


@pytest.fixture
def place(backend_target: BackendTarget) -> _Place:
    memory = MemoryBackend() if backend_target.name == "memory" else None
    return _Place(backend_target, memory)


async def _save(place: _Place) -> None:
    """Session ``s`` of ada with ``report.txt`` versions 0 and 1 and the user's ``user:cv``,
    all saved by a keyed store."""
    async with place.store(KEY) as store:
        await store.create_session(app_name="app", user_id="ada", session_id="s")
        await store.save_artifact("s", "report.txt", b"the real report", mime_type="text/plain")
        await store.save_artifact("s", "report.txt", b"second", mime_type="text/plain")
        await store.save_artifact("s", "user:cv", b"ada's cv", mime_type="text/plain")


async def _codes(place: _Place, key: bytes | None) -> set[str]:
    async with place.store(key) as store:
        return {f.code for f in await verify_session(store, "s")}


@pytest.mark.parametrize(("edit", "problem"), [
    pytest.param({"signature": None}, "artifact_unsigned", id="signature-removed"),
    pytest.param({"signature": None, "digest": None}, "artifact_unverified",
                 id="pre-0020-no-digest"),
])
async def test_a_keyed_store_refuses_a_version_without_its_seal(
        place: _Place, edit: dict[str, Any], problem: str) -> None:
    await _save(place)
    await place.edit("report.txt", 0, **edit)
    await place.edit("user:cv", 0, **edit)
    async with place.store(KEY) as store:
        with pytest.raises(TamperedArtifactError) as caught:
            await store.load_artifact("s", "report.txt", version=0)
        assert (caught.value.session_id, caught.value.filename, caught.value.version,
                caught.value.problem) == ("s", "report.txt", 0, problem)
        assert "'report.txt'" in str(caught.value)
        assert "evs db sign-artifacts" in str(caught.value)
        assert "evs verify" in str(caught.value)
        with pytest.raises(TamperedArtifactError) as shared:
            await store.load_artifact("s", "user:cv")
        assert shared.value.session_id is None
        # The other version is served; listings serve no content and stay as they were.
        assert (await store.load_artifact("s", "report.txt")).data == b"second"
        assert await store.list_artifacts("s") == {"report.txt": [0, 1], "user:cv": [0]}
        assert [v.version for v in await store.artifact_versions("s", "report.txt")] == [0, 1]
    async with place.store(None) as store:  # unkeyed: served as before
        assert (await store.load_artifact("s", "report.txt", version=0)).data == \
            b"the real report"
        assert (await store.load_artifact("s", "user:cv")).data == b"ada's cv"
    assert problem in await _codes(place, KEY)


async def test_signing_adopts_versions_without_a_seal(place: _Place) -> None:
    await _save(place)
    await place.edit("report.txt", 0, signature=None, digest=None)
    await place.edit("report.txt", 1, signature=None)
    await place.edit("user:cv", 0, signature=None)
    before = {(f, v): await place.row(f, v) for f, v in
              (("report.txt", 0), ("report.txt", 1), ("user:cv", 0))}
    events = None if place.memory else await raw(place.target, "SELECT * FROM evs_events")
    async with place.store(KEY) as store:
        report = await sign_artifacts(store.backend, dry_run=False)
    assert (report.count("signed"), report.ok, report.count("refused")) == (3, 0, 0)
    assert {(v.filename, v.version, v.problem) for v in report.versions} == {
        ("report.txt", 0, "artifact_unverified"), ("report.txt", 1, "artifact_unsigned"),
        ("user:cv", 0, "artifact_unsigned")}
    for (filename, version), old in before.items():
        new = await place.row(filename, version)
        assert {k: new[k] for k in ("data", "mime_type", "created_at")} == \
            {k: old[k] for k in ("data", "mime_type", "created_at")}
        assert new["digest"] == (old["digest"] or new["digest"])
        assert new["signature"] == sign_artifact(KEY, new["digest"])
    if events is not None:
        assert await raw(place.target, "SELECT * FROM evs_events") == events
    async with place.store(KEY) as store:
        assert (await store.load_artifact("s", "report.txt", version=0)).data == \
            b"the real report"
        assert (await store.load_artifact("s", "report.txt")).data == b"second"
        assert (await store.load_artifact("s", "user:cv")).data == b"ada's cv"
        again = await sign_artifacts(store.backend, dry_run=False)
    assert (again.ok, again.versions) == (3, [])
    assert await _codes(place, KEY) == set()


async def test_a_forged_version_is_reported_before_it_is_signed(place: _Place) -> None:
    # Bytes edited, digest recomputed, signature removed: to a keyed store it reads as a
    # version saved before the key, so it is refused and `evs verify` names it; signing it
    # is the operator's call, which is why the command says to verify first.
    await _save(place)
    await place.forge("report.txt", 0, b"a forged report")
    assert "artifact_unsigned" in await _codes(place, KEY)
    async with place.store(KEY) as store:
        with pytest.raises(TamperedArtifactError):
            await store.load_artifact("s", "report.txt", version=0)
        dry = await sign_artifacts(store.backend, dry_run=True)
    assert [(v.filename, v.version, v.outcome) for v in dry.versions] == [
        ("report.txt", 0, "would_sign")]
    assert (await place.row("report.txt", 0))["signature"] is None  # the dry run wrote nothing


@pytest.mark.parametrize(("edit", "problem"), [
    pytest.param({"data": b"a forged report", "signature": None}, "artifact_edited",
                 id="stale-digest"),
    pytest.param({"data": b"a forged report"}, "artifact_edited", id="edited-signed"),
    pytest.param({"signature": b"\0" * 32}, "artifact_bad_signature", id="bad-signature"),
])
async def test_an_edited_version_is_never_signed(place: _Place, edit: dict[str, Any],
                                                 problem: str) -> None:
    await _save(place)
    await place.edit("report.txt", 0, **edit)
    stored = await place.row("report.txt", 0)
    async with place.store(KEY) as store:
        report = await sign_artifacts(store.backend, dry_run=False)
        assert [(v.filename, v.version, v.problem, v.outcome) for v in report.versions] == [
            ("report.txt", 0, problem, "refused")]
        assert (report.ok, report.count("signed")) == (2, 0)
        with pytest.raises(TamperedArtifactError) as caught:
            await store.load_artifact("s", "report.txt", version=0)
        assert caught.value.problem == problem
    assert await place.row("report.txt", 0) == stored
    assert problem in await _codes(place, KEY)


async def test_store_artifact_seal_writes_only_a_missing_seal(place: _Place) -> None:
    await _save(place)
    signed = await place.row("report.txt", 1)
    where = {"app_name": "app", "user_id": "ada", "session_id": "s", "filename": "report.txt"}
    other = {"digest": b"\1" * 32, "signature": b"\2" * 32}
    async with place.store(KEY) as store:
        backend = store.backend
        # A signed version keeps its seal; a version that is not there is not made.
        assert not await backend.store_artifact_seal(**where, version=1, **other)
        assert not await backend.store_artifact_seal(**where, version=7, **other)
        assert await place.row("report.txt", 1) == signed
        await place.edit("report.txt", 1, signature=None)
        # A digest is never replaced: another one leaves the row unsigned.
        assert not await backend.store_artifact_seal(**where, version=1, **other)
        assert (await place.row("report.txt", 1))["signature"] is None
        assert await backend.store_artifact_seal(**where, version=1, digest=signed["digest"],
                                                 signature=signed["signature"])
        assert await place.row("report.txt", 1) == signed
        # Without a digest (pre-0020), both are stored.
        await place.edit("report.txt", 1, signature=None, digest=None)
        assert await backend.store_artifact_seal(**where, version=1, digest=signed["digest"],
                                                 signature=signed["signature"])
        assert await place.row("report.txt", 1) == signed
        assert (await store.load_artifact("s", "report.txt")).data == b"second"


async def test_signing_covers_every_scope_page_by_page(
        place: _Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sign_artifacts, "SCOPES_PAGE", 2)
    scopes = [("app", "ada", "s1"), ("app", "ada", None), ("app", "bob", "s1"),
              ("other", "ada", "s1"), ("other", "ada", "no-such-session"), ("app", "ada", "s2")]
    async with place.store(None) as store:  # saved before the store was keyed
        for app, user, sid in scopes:
            await store.save_artifact(sid, "f.txt", f"{app}/{user}/{sid}".encode(),
                                      mime_type="text/plain", app_name=app, user_id=user)
    async with place.store(KEY) as store:
        listed = await store.backend.artifact_scopes(after=None, limit=100)
        assert sorted(listed, key=lambda s: (s[0], s[1], s[2] or "")) == listed
        assert set(listed) == set(scopes)
        assert listed.index(("app", "ada", None)) < listed.index(("app", "ada", "s1"))
        report = await sign_artifacts(store.backend, dry_run=False)
        assert report.count("signed") == len(scopes)
        for app, user, sid in scopes:
            found = await store.load_artifact(sid, "f.txt", app_name=app, user_id=user)
            assert found.data == f"{app}/{user}/{sid}".encode()


async def test_signing_beside_a_save_of_new_versions(place: _Place) -> None:
    # The sign command's conditional UPDATEs and new saves of the same artifacts run at once
    # (two stores on SQL backends): every old version is signed, every new one saved signed.
    async with place.store(None) as store:
        await store.create_session(app_name="app", user_id="ada", session_id="s")
        for n in range(8):
            await store.save_artifact("s", "log.txt", b"old %d" % n, mime_type="text/plain")
    async with place.store(KEY) as signer, place.store(KEY) as saver:
        async def save_more() -> None:
            for n in range(8, 24):
                await saver.save_artifact("s", "log.txt", b"new %d" % n, mime_type="text/plain")

        report, _ = await asyncio.gather(sign_artifacts(signer.backend, dry_run=False),
                                         save_more())
        assert report.count("refused") == 0
        assert report.count("signed") == 8
        for n in range(24):
            loaded = await signer.load_artifact("s", "log.txt", version=n)
            assert loaded.data == (b"old %d" if n < 8 else b"new %d") % n
    assert await _codes(place, KEY) == set()


async def test_a_keyed_export_and_prune_refuse_a_version_without_its_seal(
        place: _Place, tmp_path: Path) -> None:
    await _save(place)
    async with place.store(KEY) as store:
        await store.append("s", Event(author="agent", actions=EventActions(
            artifact_delta={"report.txt": 0, "user:cv": 0})), expected_version=0)
    await place.edit("user:cv", 0, signature=None)
    async with place.store(KEY) as store:
        record = await store.backend.get_session("s")
        assert record is not None
        with pytest.raises(TamperedArtifactError) as caught:
            await write_export(store.backend, record, io.BytesIO())
        assert (caught.value.filename, caught.value.problem) == ("user:cv", "artifact_unsigned")
        with pytest.raises(TamperedArtifactError):
            await store.prune(older_than=1e-9, archive=tmp_path / "archive",
                              now=time.time() + 60)
        assert (await store.session_info("s")).version == 1  # kept: its archive failed
    async with place.store(None) as store:  # unkeyed: exported as before
        record = await store.backend.get_session("s")
        assert record is not None
        assert await write_export(store.backend, record, io.BytesIO()) == 1
