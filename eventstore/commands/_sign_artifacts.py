"""``evs db sign-artifacts``: the operator vouches, with the store's key, for the artifact
versions that were saved before the key or before revision 0020 (which a keyed store does not
serve).

Every stored version is judged as a keyed load judges it (``artifact_problem``):

- ``artifact_unverified`` (no digest): its digest and signature are computed from the content
  as it is now and stored;
- ``artifact_unsigned`` (a digest, no signature): the content still hashes to its stored
  digest (else it would be ``artifact_edited``), so only the signature is stored;
- ``artifact_edited`` / ``artifact_bad_signature``: never signed, reported (still refused);
- a version that checks out is untouched.

A seal is written only where the row has none (``Backend.store_artifact_seal``: one
conditional UPDATE of the seal columns; no event row is touched), so an existing signature or
digest is never replaced. Nothing here can tell a legacy version from one edited by someone
who also recomputed its digest and removed its signature: signing says that the content as it
is now is what the operator vouches for, which is why ``evs verify`` comes first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

import typer

from eventstore.backends.protocol import Backend, artifact_problem, seal_artifact

from .._chain import SIGNING_KEY_ENV, resolve_signing_key
from ._common import (
    DEFAULT_DB,
    CliError,
    DbOption,
    JsonOption,
    console,
    fail,
    open_existing,
    print_json,
    printable,
    prog,
    run,
)

__all__ = ["ArtifactSeal", "SignReport", "db_sign_artifacts", "sign_artifacts"]

SCOPES_PAGE = 500
"""Artifact scopes (app, user, session) read per step."""

_SIGNABLE = frozenset({"artifact_unsigned", "artifact_unverified"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactSeal:
    """What the command did (or would do) with one artifact version that was not signed."""

    app_name: str
    """The app the artifact belongs to."""
    user_id: str
    """The user it belongs to."""
    session_id: str | None
    """The session id it is stored under, None for the user's artifacts."""
    filename: str
    """Its filename."""
    version: int
    """Its version."""
    problem: str
    """What a keyed load says of it (``artifact_problem``'s code)."""
    outcome: str
    """``signed``, ``would_sign`` (dry run), ``refused`` (edited or a bad signature: never
    signed) or ``changed`` (deleted or sealed by another process meanwhile)."""


@dataclass(slots=True)
class SignReport:
    """The outcome of one run over every stored artifact version."""

    dry_run: bool
    """Nothing was written."""
    ok: int = 0
    """Versions already signed by this key (untouched)."""
    versions: list[ArtifactSeal] = field(default_factory=list)
    """Every other version, in scope, filename and version order."""

    def count(self, outcome: str) -> int:
        """How many versions had ``outcome``."""
        return sum(1 for v in self.versions if v.outcome == outcome)


async def sign_artifacts(backend: Backend, *, dry_run: bool) -> SignReport:
    """Sign every stored artifact version the backend's key does not vouch for and whose
    content is as its record says (module docstring); with ``dry_run``, only say which.
    Reads one version's bytes at a time. Raises CliError when the backend has no key."""
    if backend.signing_key is None:
        raise _no_key()
    report = SignReport(dry_run=dry_run)
    after: tuple[str, str, str | None] | None = None
    while True:
        scopes = await backend.artifact_scopes(after=after, limit=SCOPES_PAGE)
        for app, user, scope in scopes:
            listed = await backend.list_artifacts(app_name=app, user_id=user, session_id=scope)
            for filename, versions in listed.items():
                for version in versions:
                    where = _Where(app, user, scope, filename, version)
                    judged = await _sign_version(backend, backend.signing_key, where,
                                                 dry_run=dry_run)
                    if judged is None:
                        report.ok += 1
                    elif judged[1] != "gone":
                        report.versions.append(ArtifactSeal(
                            app_name=app, user_id=user, session_id=scope, filename=filename,
                            version=version, problem=judged[0], outcome=judged[1]))
        if len(scopes) < SCOPES_PAGE:
            return report
        after = scopes[-1]


class _Where(NamedTuple):
    """One stored artifact version's address."""

    app_name: str
    user_id: str
    session_id: str | None
    filename: str
    version: int


async def _sign_version(backend: Backend, key: bytes, where: _Where, *,
                        dry_run: bool) -> tuple[str, str] | None:
    """Judge the version ``where`` names and, unless ``dry_run``, sign it when it may be:
    ``(problem, outcome)`` (``ArtifactSeal``'s; outcome ``gone`` when it was deleted since it
    was listed), or None when it checks out."""
    address = where._asdict()
    record = await backend.load_artifact(**address)
    if record is None:
        return "", "gone"
    problem = artifact_problem(record, key)
    if problem is None:
        return None
    if problem not in _SIGNABLE:
        return problem, "refused"
    try:
        digest, signature = seal_artifact(
            key, filename=record.filename, version=record.version, mime_type=record.mime_type,
            created_at=record.created_at, metadata=record.metadata, data=record.data)
    except (ValueError, TypeError):  # a row no save could have written
        return "artifact_edited", "refused"
    assert signature is not None
    if dry_run:
        return problem, "would_sign"
    sealed = await backend.store_artifact_seal(**address, digest=digest, signature=signature)
    return problem, "signed" if sealed else "changed"


def _refuse_a_wrong_key(judged: SignReport) -> None:
    """Refuse to sign when signatures are stored and not one matches the key: signing under a
    wrong key would seal the unsigned versions so that the right key refuses them too."""
    bad = sum(1 for v in judged.versions if v.problem == "artifact_bad_signature")
    if bad and not judged.ok:
        raise CliError(f"No stored artifact signature matches this key ({bad} bad, none "
                       f"good): {SIGNING_KEY_ENV} is probably not the key the store signed "
                       "with; nothing was signed. If the key is right, every signed version "
                       f"was forged: {prog()} verify names them.")


def _no_key() -> CliError:
    return CliError(f"{prog()} db sign-artifacts signs with the store's key: set "
                    f"{SIGNING_KEY_ENV} to the key the store runs with; nothing was signed.")


def _describe(seal: ArtifactSeal) -> str:
    owner = f"app {printable(seal.app_name)!r}, user {printable(seal.user_id)!r}"
    if seal.session_id is not None:
        owner = f"session {printable(seal.session_id)!r}, {owner}"
    return (f"artifact {printable(seal.filename)!r} version {seal.version} ({owner}): "
            f"{seal.problem}")


_VERBS = {"signed": "signed", "would_sign": "would sign", "changed": "changed meanwhile, left",
          "refused": "refused, not signed"}


def _summary(report: SignReport) -> str:
    counts = Counter(v.outcome for v in report.versions)
    refused = f"{counts['refused']} refused (edited or a bad signature)"
    if counts["refused"]:
        refused += f": {prog()} verify names the damage"
    if report.dry_run:
        return (f"Dry run: {counts['would_sign']} version(s) would be signed, {report.ok} "
                f"already signed, {refused}; nothing was written.")
    changed = f", {counts['changed']} changed meanwhile" if counts["changed"] else ""
    return (f"Signed {counts['signed']} version(s), {report.ok} already signed{changed}, "
            f"{refused}.")


def db_sign_artifacts(
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the versions it would sign; write nothing.")] = False,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Vouch, with the store's key (EVS_SIGNING_KEY), for the artifact versions saved before
    the key or before revision 0020, which a keyed store does not serve: a version without a
    digest gets its digest and signature, one without a signature (whose content still
    matches its digest) its signature. An edited version or one with a bad signature is
    never signed, only reported; an existing digest or signature is never replaced.

    This blesses each version's content as it is now, and nothing can tell an old version
    from one edited by someone who also recomputed its digest and removed its signature: run
    evs verify first. Exits with status 1 when versions are left refused (edited or a bad
    signature), 0 otherwise."""
    if resolve_signing_key(None) is None:
        fail(str(_no_key()))

    async def main() -> SignReport:
        async with await open_existing(db, read_only=dry_run) as store:
            if not dry_run:
                _refuse_a_wrong_key(await sign_artifacts(store.backend, dry_run=True))
            return await sign_artifacts(store.backend, dry_run=dry_run)

    report = run(main())
    if json:
        print_json(_report_json(report))
    else:
        out = console()
        for seal in report.versions:
            out.print(f"{_VERBS[seal.outcome]}: {_describe(seal)}", markup=False,
                      highlight=False)
        out.print(_summary(report), markup=False, highlight=False)
    if report.count("refused"):
        raise typer.Exit(1)


def _report_json(report: SignReport) -> dict[str, Any]:
    return {
        "dry_run": report.dry_run,
        "signed": report.count("signed"),
        "would_sign": report.count("would_sign"),
        "already_signed": report.ok,
        "refused": report.count("refused"),
        "changed": report.count("changed"),
        "versions": [
            {"app_name": v.app_name, "user_id": v.user_id, "session_id": v.session_id,
             "filename": v.filename, "version": v.version, "problem": v.problem,
             "outcome": v.outcome}
            for v in report.versions
        ],
    }
