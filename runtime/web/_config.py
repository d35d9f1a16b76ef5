"""How ``evs web`` was started (``WebConfig``), and whether its database can be written."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

from eventstore.commands._common import sqlite_path

from .._host_check import is_loopback

__all__ = ["WebConfig", "writable"]


@dataclass(kw_only=True)
class WebConfig:
    """How the app was started."""

    db: str
    """Database URL (as ``--db`` takes it)."""
    allow_writes: bool = False
    """Whether write actions are offered at all (``--allow-writes``)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """The per-start token the printed URL carries once (``/?token=…``); it sets the session
    cookie that writes (and, on a non-loopback host, reads) need."""
    host: str = "127.0.0.1"
    """The address the server binds (``--host``): its name is answered, and anything but a
    loopback address makes reads need the token too."""
    allowed_hosts: tuple[str, ...] = ()
    """More ``Host`` names to answer (``--allowed-host``: ``NAME`` or ``NAME:PORT``)."""
    poll_interval: float = 0.5
    """Seconds between polls of a live session."""

    @property
    def remote(self) -> bool:
        """Whether the server binds more than this machine's loopback (reads need the
        token)."""
        return not is_loopback(self.host)

    @property
    def needs_token(self) -> bool:
        """Whether the printed URL carries the token (writes allowed, or a remote host)."""
        return self.allow_writes or self.remote


def writable(db: str) -> tuple[bool, str]:
    """Whether the database can be written, and why not."""
    path = sqlite_path(db)
    if path is not None and not os.access(path, os.W_OK):
        return False, f"the database file {path} is read-only"
    if path is not None and not os.access(path.parent, os.W_OK):
        return False, f"the folder of {path} is read-only (SQLite needs it for its journal)"
    return True, ""
