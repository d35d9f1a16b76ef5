"""State caches dropped: ``None`` became a state value and deletions their own record.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

Until this revision the fold read a ``None`` in a state delta as "delete the key"; now ``None``
is a value like any other (as in ADK, whose ``{"k": None}`` keeps ``"k"`` in the state) and a
deletion is the event's own ``state_deletions`` list (stored under the payload key ``sx``).
No event changes: the log is the truth and its bytes stay as they are. What changes is the
fold of a log holding a ``None``, so every cache folded under the old rule may now be wrong:
the snapshots of session state (``evs_snapshots``), of ``user:``/``app:`` state
(``evs_shared_snapshots``) and the named session caches (``evs_session_caches``). They are
dropped (as ``evs db rebuild-snapshots`` does); the next reads rebuild them from the log.

Downgrading drops them again, for the same reason the other way round. Code of revision 0012
does not know ``sx``: it would fold an event's deletions as nothing, so downgrade only a
database whose events carry none.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CACHES = ("evs_snapshots", "evs_shared_snapshots", "evs_session_caches")


def upgrade() -> None:
    for table in _CACHES:
        op.execute(f"DELETE FROM {table}")


def downgrade() -> None:
    for table in _CACHES:
        op.execute(f"DELETE FROM {table}")
