"""Private PostgreSQL clusters for tests that restart, stop, kill or fail over the server.

The shared server at 127.0.0.1:5432 serves every other test (and other test runs), so a test
that restarts PostgreSQL starts its own: ``initdb`` into a temporary directory, ``pg_ctl`` on a
free loopback port, stopped and removed afterwards. The server binaries come from Debian's
``postgresql`` package (``/usr/lib/postgresql/<version>/bin``); as root the server runs as the
``postgres`` user. Where neither is available the test skips saying so (fails under ``CI``).

``replication`` builds a primary and a hot standby as PostgreSQL's own recovery tests do:
``initdb`` the primary, ``pg_basebackup -R`` the standby from it (``standby.signal`` and
``primary_conninfo`` written for it), each on its own free port; synchronous
(``synchronous_standby_names = '*'``, ``synchronous_commit = on``: a commit is acknowledged
once the standby has flushed it) or asynchronous. A failover is ``kill()`` (SIGKILL to the
postmaster) then ``promote()``; the old primary comes back as the new one's standby with
``rebuild_standby`` (``pg_rewind``, or a new base backup).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass(frozen=True, kw_only=True)
class PrivateCluster:
    """A running PostgreSQL cluster of this test alone."""

    bin_dir: Path
    data_dir: Path
    port: int
    run_as: list[str]
    settings: tuple[str, ...] = ()
    """Extra ``name=value`` server settings (``-c``)."""
    fsync: bool = False
    """Whether the server flushes its WAL (off, the default, where no test pulls the power)."""

    @property
    def url(self) -> str:
        """The store URL of its ``postgres`` database."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        """Its ``postgres`` database as a libpq connection string (for the server tools)."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        options = " ".join(
            [f"-p {self.port} -k {self.data_dir.parent} -c listen_addresses=127.0.0.1",
             f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=100",
             *(f"-c {setting}" for setting in self.settings)])
        subprocess.run(
            [*self.run_as, str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-w",
             "-o", options, "-l", str(self.data_dir.parent / f"{self.data_dir.name}.log"),
             *args],
            check=True, capture_output=True, timeout=timeout,
        )

    def tool(self, name: str, *args: str, timeout: float = 120) -> str:
        """Run the server tool ``name`` (``pg_basebackup``, ``pg_rewind``, ``psql`` …) as the
        server's user; returns its output (stdout, then stderr)."""
        done = subprocess.run([*self.run_as, str(self.bin_dir / name), *args], check=True,
                              capture_output=True, text=True, timeout=timeout)
        return done.stdout + done.stderr

    def sql(self, statement: str) -> str:
        """The first column of the first row ``statement`` returns (psql, unaligned)."""
        return self.tool("psql", "-d", self.dsn, "-XAtqc", statement, timeout=30).strip()

    def kill(self) -> None:
        """SIGKILL the postmaster: the server dies as in a crash (its backends notice and exit
        without answering; nothing is shut down cleanly)."""
        pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        # Its backends outlive it for a moment (each exits when it notices, without
        # answering its client); a new server on this directory must wait for them.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (_listening(self.port) or _holders(self.data_dir)):
            time.sleep(0.05)
        for left in _holders(self.data_dir):
            with contextlib.suppress(OSError):
                os.kill(left, signal.SIGKILL)
        # Where nothing reaps orphans (a container's init), the dead postmaster stays a zombie
        # whose pid still answers, and its lock files would keep a new server from starting.
        for lock in (self.data_dir / "postmaster.pid",
                     self.data_dir.parent / f".s.PGSQL.{self.port}.lock"):
            lock.unlink(missing_ok=True)

    def promote(self) -> None:
        """Promote this standby to primary and wait until it accepts writes."""
        self._pg_ctl("promote")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("start")

    def restart(self) -> None:
        """Restart the server (fast shutdown: open connections are terminated)."""
        self._pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        """Stop the server (fast shutdown)."""
        self._pg_ctl("-m", "fast", "stop")


def _holders(path: Path) -> list[int]:
    """The processes whose working directory is ``path`` (a server's processes run in its
    data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "cwd") == str(path):
                    found.append(int(entry.name))
    return found


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _binaries() -> tuple[Path, list[str]]:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        _unavailable("the PostgreSQL server binaries (/usr/lib/postgresql/*/bin, Debian's "
                     "postgresql package) are not installed; install them to run this test")
    run_as: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _unavailable("running as root without runuser: cannot start a private cluster")
        run_as = ["runuser", "-u", "postgres", "--"]
    return Path(found[-1]).parent, run_as


def _root(run_as: list[str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="evs-pg-"))
    if run_as:
        shutil.chown(root, user="postgres")
    return root


def _initdb(bin_dir: Path, run_as: list[str], data_dir: Path, *args: str) -> None:
    subprocess.run(
        [*run_as, str(bin_dir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U",
         "postgres", "-E", "UTF8", "--no-sync", *args],
        check=True, capture_output=True, timeout=120,
    )


@pytest.fixture
def private_cluster() -> Iterator[PrivateCluster]:
    """A freshly initialised PostgreSQL cluster on a free port, removed after the test."""
    bin_dir, run_as = _binaries()
    root = _root(run_as)
    data_dir = root / "data"
    _initdb(bin_dir, run_as, data_dir)
    cluster = PrivateCluster(bin_dir=bin_dir, data_dir=data_dir, port=_free_port(),
                             run_as=run_as)
    cluster.start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped by the test
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


REPLICATION_SETTINGS = (
    "wal_level=replica", "max_wal_senders=10", "wal_keep_size=256MB", "hot_standby=on",
    "wal_receiver_status_interval=1s",
)
"""Server settings of both nodes (a standby ignores what only a primary uses)."""


@dataclass(kw_only=True)
class Replication:
    """A primary and a hot standby on one machine (see the module docstring); the nodes
    swap roles at each failover. ``nodes`` keeps the two clusters, ``primary`` and
    ``standby`` name them by their current role."""

    bin_dir: Path
    run_as: list[str]
    root: Path
    synchronous: bool
    nodes: list[PrivateCluster] = field(default_factory=list)
    primary_index: int = 0
    rewind_errors: list[str] = field(default_factory=list)
    """What each ``pg_rewind`` that failed said (``rebuild_standby`` then took a base backup)."""

    @property
    def primary(self) -> PrivateCluster:
        """The node that takes writes now."""
        return self.nodes[self.primary_index]

    @property
    def standby(self) -> PrivateCluster:
        """The other node (a standby once ``rebuild_standby`` ran after a failover)."""
        return self.nodes[1 - self.primary_index]

    @property
    def url(self) -> str:
        """A multi-host URL of both nodes that reaches whichever is primary."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"postgresql+asyncpg://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def settings(self) -> tuple[str, ...]:
        """The server settings of a node of this pair."""
        sync = ("synchronous_standby_names='*'", "synchronous_commit=on") if \
            self.synchronous else ()
        return (*REPLICATION_SETTINGS, *sync)

    def start(self) -> None:
        """Build and start the primary, then its standby, and wait until it streams."""
        data = self.root / "node0"
        # Data checksums: pg_rewind can rewind a crashed primary whatever its settings.
        _initdb(self.bin_dir, self.run_as, data, "--data-checksums")
        # In the configuration file, not on the command line: the crash recovery pg_rewind
        # runs reads only the file (without wal_keep_size it recycles the WAL the rewind
        # needs), and ALTER SYSTEM can still change a setting (a command line would win).
        with (data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{setting}\n" for setting in self.settings()))
        primary = PrivateCluster(bin_dir=self.bin_dir, data_dir=data, port=_free_port(),
                                 run_as=self.run_as, fsync=True)
        primary.start()
        self.nodes = [primary]
        self.nodes.append(self._base_backup(self.root / "node1", _free_port()))
        self.nodes[1].start()
        self.wait_streaming()

    def _base_backup(self, data: Path, port: int) -> PrivateCluster:
        shutil.rmtree(data, ignore_errors=True)
        self.primary.tool("pg_basebackup", "-D", str(data), "-d", self.primary.dsn, "-R",
                          "-X", "stream", "--no-sync", "-c", "fast")
        return PrivateCluster(bin_dir=self.bin_dir, data_dir=data, port=port,
                              run_as=self.run_as, fsync=True)

    def wait_streaming(self, timeout: float = 60) -> None:
        """Wait until the primary sees its standby streaming (and, synchronous, as sync)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.primary.sql(
                "SELECT string_agg(state || '/' || sync_state, ',') FROM pg_stat_replication")
            if state == f"streaming/{want}":
                return
            time.sleep(0.1)
        raise TimeoutError(f"the standby did not stream from the primary ({state!r})")

    def fail_over(self) -> None:
        """Crash the primary (SIGKILL to its postmaster) and promote the standby."""
        old = self.primary
        old.kill()
        self.standby.promote()
        self.primary_index = 1 - self.primary_index
        assert self.primary.sql("SELECT pg_is_in_recovery()") == "f"
        assert old is self.standby

    def rebuild_standby(self, *, rewind: bool = True) -> str:
        """Bring the crashed old primary back as the new primary's standby: ``pg_rewind``
        (after crash recovery it runs itself) or, ``rewind=False`` or when the rewind fails,
        a new base backup; then start it and wait until it streams. Returns which it was
        (``"pg_rewind"`` or ``"base backup"``)."""
        old = self.standby
        if rewind:
            try:
                # A promoted server records its new timeline in its control file at its next
                # checkpoint; until then pg_rewind sees one timeline and rewinds nothing.
                self.primary.sql("CHECKPOINT")
                old.tool("pg_rewind", "-D", str(old.data_dir), "--source-server",
                         self.primary.dsn, "-R", timeout=300)
            except subprocess.CalledProcessError as exc:
                self.rewind_errors.append(exc.stderr)
                rewind = False
        if not rewind:
            old = self._base_backup(old.data_dir, old.port)
            self.nodes[1 - self.primary_index] = old
        old.start()
        self.wait_streaming()
        return "pg_rewind" if rewind else "base backup"

    def stop(self) -> None:
        """Stop both nodes (whatever their state) and remove their files."""
        for node in self.nodes:
            with contextlib.suppress(subprocess.CalledProcessError,
                                     subprocess.TimeoutExpired, OSError, ValueError):
                if (node.data_dir / "postmaster.pid").exists():
                    node._pg_ctl("-m", "immediate", "stop", timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def replication() -> Iterator[Callable[..., Replication]]:
    """Build a primary and a standby (``replication(synchronous=True)``); removed after the
    test."""
    bin_dir, run_as = _binaries()
    built: list[Replication] = []

    def build(*, synchronous: bool) -> Replication:
        pair = Replication(bin_dir=bin_dir, run_as=run_as, root=_root(run_as),
                           synchronous=synchronous)
        built.append(pair)
        pair.start()
        return pair

    try:
        yield build
    finally:
        for pair in built:
            pair.stop()
