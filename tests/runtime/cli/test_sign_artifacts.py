"""``evs db sign-artifacts``: the operator's way to vouch, with the key, for artifact versions
saved before the key or before revision 0020, which a keyed store refuses to serve (issue 35).
A dry run lists and writes nothing; a run signs what has no seal and whose content matches its
record, reports edited versions (exit 1) and never touches a seal that is there; without the
key it refuses. A keyed ``evs export`` of a session with a refused version fails clearly."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import orjson
from _cli_support import invoke

from eventstore import open_store

KEY = "c" * 32
KEYED = {"EVS_SIGNING_KEY": KEY}
UNKEYED = {"EVS_SIGNING_KEY": ""}


def _saved(db: Path) -> None:
    """Session ``s`` with ``report.txt`` versions 0 and 1 and the user's ``user:cv``, saved by a
    keyed store; then, behind its back, version 0's signature and digest are removed (as before
    revision 0020) and ``user:cv``'s signature (as before the key)."""

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True, signing_key=KEY) as store:
            await store.create_session(app_name="app", user_id="ada", session_id="s")
            for data in (b"the real report", b"second"):
                await store.save_artifact("s", "report.txt", data, mime_type="text/plain")
            await store.save_artifact("s", "user:cv", b"ada's cv", mime_type="text/plain")

    asyncio.run(work())
    _sql(db, "UPDATE evs_artifacts SET signature = NULL, digest = NULL "
         "WHERE filename = 'report.txt' AND version = 0")
    _sql(db, "UPDATE evs_artifacts SET signature = NULL WHERE filename = 'user:cv'")


def _sql(db: Path, statement: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute(statement))


def _seals(db: Path) -> list[tuple[object, ...]]:
    return _sql(db, "SELECT filename, version, digest, signature FROM evs_artifacts "
                "ORDER BY filename, version")


def test_sign_artifacts_dry_run_lists_them_and_writes_nothing(db: Path) -> None:
    _saved(db)
    before = _seals(db)
    result = invoke("db", "sign-artifacts", "--dry-run", "--db", str(db), env=KEYED)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "would sign: artifact 'user:cv' version 0 (app 'app', user 'ada'): artifact_unsigned",
        "would sign: artifact 'report.txt' version 0 (session 's', app 'app', user 'ada'): "
        "artifact_unverified",
        "Dry run: 2 version(s) would be signed, 1 already signed, 0 refused (edited or a bad "
        "signature); nothing was written.",
    ]
    assert _seals(db) == before


def test_sign_artifacts_signs_them_and_a_keyed_store_serves_them(db: Path) -> None:
    _saved(db)
    refused = invoke("export", "s", "--db", str(db), env=KEYED)
    assert refused.exit_code == 1
    assert "artifact 'report.txt'" in refused.stderr
    assert "not served" in refused.stderr
    assert "evs db sign-artifacts" in refused.stderr
    assert invoke("verify", "--db", str(db), env=KEYED).exit_code == 3
    result = invoke("db", "sign-artifacts", "--db", str(db), env=KEYED)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "Signed 2 version(s), 1 already signed, 0 refused (edited or a bad signature).")
    assert all(digest is not None and signature is not None
               for _, _, digest, signature in _seals(db))
    verified = invoke("verify", "--db", str(db), env=KEYED)
    assert verified.exit_code == 0, verified.stdout
    assert invoke("export", "s", "--db", str(db), env=KEYED).exit_code == 0
    again = invoke("db", "sign-artifacts", "--db", str(db), "--json", env=KEYED)
    assert again.exit_code == 0
    assert orjson.loads(again.stdout) == {"dry_run": False, "signed": 0, "would_sign": 0,
                                          "already_signed": 3, "refused": 0, "changed": 0,
                                          "versions": []}


def test_sign_artifacts_exits_1_and_signs_no_edited_version(db: Path) -> None:
    _saved(db)
    # Bytes edited and the signature removed, the digest left stale: the content does not
    # match its record, so it is never signed.
    _sql(db, "UPDATE evs_artifacts SET data = X'00', signature = NULL "
         "WHERE filename = 'report.txt' AND version = 1")
    result = invoke("db", "sign-artifacts", "--db", str(db), "--json", env=KEYED)
    assert result.exit_code == 1
    report = orjson.loads(result.stdout)
    assert (report["signed"], report["refused"], report["already_signed"]) == (2, 1, 0)
    assert {(v["filename"], v["version"], v["problem"], v["outcome"])
            for v in report["versions"]} == {
        ("report.txt", 0, "artifact_unverified", "signed"),
        ("report.txt", 1, "artifact_edited", "refused"),
        ("user:cv", 0, "artifact_unsigned", "signed")}
    assert _sql(db, "SELECT signature FROM evs_artifacts WHERE filename = 'report.txt' "
                "AND version = 1") == [(None,)]
    plain = invoke("db", "sign-artifacts", "--db", str(db), env=KEYED)
    assert plain.exit_code == 1
    assert ("refused, not signed: artifact 'report.txt' version 1 (session 's', app 'app', "
            "user 'ada'): artifact_edited") in plain.stdout
    assert "1 refused (edited or a bad signature): evs verify names the damage." in plain.stdout


def test_sign_artifacts_needs_the_key(db: Path) -> None:
    _saved(db)
    before = _seals(db)
    result = invoke("db", "sign-artifacts", "--db", str(db), env=UNKEYED)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("evs: error: ")
    assert "EVS_SIGNING_KEY" in result.stderr
    assert "nothing was signed" in result.stderr
    assert _seals(db) == before


def test_sign_artifacts_help_says_to_verify_first() -> None:
    shown = invoke("db", "sign-artifacts", "--help")
    assert shown.exit_code == 0
    text = " ".join(shown.stdout.split())
    assert "run evs verify first" in text
    assert "content as it is now" in text
    assert "--dry-run" in text
    listed = " ".join(invoke("db", "--help").stdout.split())
    assert "sign-artifacts" in listed


def test_an_unkeyed_export_serves_versions_without_a_seal(db: Path) -> None:
    _saved(db)
    result = invoke("export", "s", "--db", str(db), env=UNKEYED)
    assert result.exit_code == 0, result.stderr


def test_sign_artifacts_under_a_wrong_key_signs_nothing_and_says_so(db: Path) -> None:
    _saved(db)
    before = _seals(db)
    wrong = invoke("db", "sign-artifacts", "--db", str(db), env={"EVS_SIGNING_KEY": "w" * 32})
    assert wrong.exit_code == 1
    assert "No stored artifact signature matches this key (1 bad, none good)" in wrong.stderr
    assert "EVS_SIGNING_KEY is probably not the key" in wrong.stderr
    assert _seals(db) == before  # version 0 and user:cv stay unsigned for the right key
    right = invoke("db", "sign-artifacts", "--db", str(db), "--json", env=KEYED)
    assert right.exit_code == 0, right.stderr
    assert orjson.loads(right.stdout)["signed"] == 2
