"""A throwaway PostgreSQL server for tests and benchmarks.

``TOPOQ_TEST_POSTGRES_URL`` (a user that may ``CREATE DATABASE``) is used when set; otherwise
``start_throwaway`` makes a cluster with the server binaries of the distribution's package
(``/usr/lib/postgresql/*/bin``: ``initdb``, then ``pg_ctl start`` on a free localhost port with
its socket in a temporary directory, as the ``postgres`` user when run as root) and ``stop``
removes it. Needs psycopg (``pip install 'topoq[postgres]'``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from topoq.executors.local.processes import free_port

POSTGRES_URL_ENV = "TOPOQ_TEST_POSTGRES_URL"
SERVER_USER = "postgres"
"""Who runs a throwaway server when we run as root (initdb refuses root)."""
COMMAND_TIMEOUT_S = 120


@dataclass
class PostgresServer:
    """A server on which each user (a test, a benchmark) gets a database of its own."""

    base_url: str
    """``postgresql://user@host:port`` without a database name."""
    admin_database: str = "postgres"
    stop: Callable[[], None] = lambda: None
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(f"{self.base_url}/{self.admin_database}", autocommit=True)

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = f"topoq_test_{os.getpid()}_{next(self._numbers)}"
        with self.admin() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return f"{self.base_url}/{name}"

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def given_server() -> PostgresServer | None:
    """The server ``TOPOQ_TEST_POSTGRES_URL`` names, if it is set."""
    given = os.environ.get(POSTGRES_URL_ENV)
    if not given:
        return None
    base, _, database = given.replace("postgresql+psycopg://", "postgresql://").rpartition("/")
    return PostgresServer(base, admin_database=database or "postgres")


def server_binaries() -> Path | None:
    """The newest PostgreSQL server binary directory of the distribution's package, or PATH's."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    return None


def start_throwaway(binaries: Path, *, fsync: bool = False) -> PostgresServer:
    """initdb + pg_ctl start in a temporary directory (as ``postgres`` when we are root).
    ``fsync=False`` (tests) trades durability for speed; benchmarks keep it on."""
    root = Path(tempfile.mkdtemp(prefix="topoq-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVER_USER)  # made by the Debian package
        os.chown(root, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", SERVER_USER, "--"]
    data, port = root / "data", free_port()

    def run(*command: str) -> None:
        subprocess.run(
            [*as_user, *command], check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S
        )

    initdb, pg_ctl = str(binaries / "initdb"), str(binaries / "pg_ctl")
    run(initdb, "-D", str(data), "-A", "trust", "-U", "topoq", "--no-sync", "-E", "UTF8",
        "--locale=C")  # fmt: skip
    settings = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    if not fsync:
        settings += " -c fsync=off"
    run(pg_ctl, "-D", str(data), "-o", settings, "-l", str(root / "log"), "-w", "start")

    def stop() -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)

    return PostgresServer(f"postgresql://topoq@127.0.0.1:{port}", stop=stop)
