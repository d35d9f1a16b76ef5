"""A private PostgreSQL cluster for tests that restart or stop the server.

The shared server at 127.0.0.1:5432 serves every other test (and other test runs), so a test
that restarts PostgreSQL starts its own: ``initdb`` into a temporary directory, ``pg_ctl`` on a
free loopback port, stopped and removed afterwards. The server binaries come from Debian's
``postgresql`` package (``/usr/lib/postgresql/<version>/bin``); as root the server runs as the
``postgres`` user. Where neither is available the test skips saying so (fails under ``CI``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True, kw_only=True)
class PrivateCluster:
    """A running PostgreSQL cluster of this test alone."""

    bin_dir: Path
    data_dir: Path
    port: int
    run_as: list[str]

    @property
    def url(self) -> str:
        """The store URL of its ``postgres`` database."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        options = (f"-p {self.port} -k {self.data_dir.parent} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=100")
        subprocess.run(
            [*self.run_as, str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-w",
             "-o", options, "-l", str(self.data_dir.parent / "server.log"), *args],
            check=True, capture_output=True, timeout=60,
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("start")

    def restart(self) -> None:
        """Restart the server (fast shutdown: open connections are terminated)."""
        self._pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        """Stop the server (fast shutdown)."""
        self._pg_ctl("-m", "fast", "stop")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def private_cluster() -> Iterator[PrivateCluster]:
    """A freshly initialised PostgreSQL cluster on a free port, removed after the test."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        _unavailable("the PostgreSQL server binaries (/usr/lib/postgresql/*/bin, Debian's "
                     "postgresql package) are not installed; install them to run this test")
    bin_dir = Path(found[-1]).parent
    run_as: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _unavailable("running as root without runuser: cannot start a private cluster")
        run_as = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="evs-pg-"))
    if run_as:
        shutil.chown(root, user="postgres")
    data_dir = root / "data"
    subprocess.run(
        [*run_as, str(bin_dir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U",
         "postgres", "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True, timeout=120,
    )
    cluster = PrivateCluster(bin_dir=bin_dir, data_dir=data_dir, port=_free_port(),
                             run_as=run_as)
    cluster.start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped by the test
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
