"""ADK's artifact service on a keyed store serves no version the key does not vouch for
(issue 35): a version whose signature was removed is refused with TamperedArtifactError, not
returned, until ``evs db sign-artifacts`` (``sign_artifacts``) vouches for it."""

from __future__ import annotations

import dataclasses

from _extras import require_extra

adk = require_extra("google.adk", "adk")

import pytest  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore import EventStore, TamperedArtifactError  # noqa: E402
from eventstore.backends.memory import MemoryBackend  # noqa: E402
from eventstore.commands._sign_artifacts import sign_artifacts  # noqa: E402
from eventstore.integrations.adk import EventStoreArtifactService  # noqa: E402

KEY = b"a" * 32


async def test_adk_artifact_service_refuses_an_unsigned_version_keyed() -> None:
    backend = MemoryBackend(signing_key=KEY)
    service = EventStoreArtifactService(EventStore(backend))
    scope = {"app_name": "app", "user_id": "ada", "session_id": "s"}
    part = types.Part(text="the real report")
    assert await service.save_artifact(filename="report.txt", artifact=part, **scope) == 0
    for records in backend._artifacts.values():
        records[:] = [dataclasses.replace(r, signature=None) for r in records]
    with pytest.raises(TamperedArtifactError) as caught:
        await service.load_artifact(filename="report.txt", **scope)
    assert caught.value.problem == "artifact_unsigned"
    assert await service.list_versions(filename="report.txt", **scope) == [0]
    report = await sign_artifacts(backend, dry_run=False)
    assert report.count("signed") == 1
    assert await service.load_artifact(filename="report.txt", **scope) == part
