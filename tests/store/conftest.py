"""Store tests run on SQLite and on PostgreSQL.

PostgreSQL: ``TOPOQ_TEST_POSTGRES_URL`` (a user that may CREATE DATABASE) if set; otherwise a
throwaway cluster made with the server binaries of the distribution's package
(``/usr/lib/postgresql/*/bin``), started on a free localhost port for the session and removed
after it. Without either, the PostgreSQL cases are skipped — except under CI, where they fail.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from topoq.store import SqlStore, open_store

POSTGRES_URL_ENV = "TOPOQ_TEST_POSTGRES_URL"
SERVER_USER = "postgres"
"""Who runs a throwaway server when the tests run as root (initdb refuses root)."""
BACKENDS = ["sqlite", "postgresql"]


@dataclass
class PostgresServer:
    """A server on which each test gets a database of its own."""

    base_url: str
    """``postgresql://user@host:port`` without a database name."""
    admin_database: str = "postgres"
    stop: Callable[[], None] = lambda: None
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(f"{self.base_url}/{self.admin_database}", autocommit=True)

    def create_database(self) -> str:
        name = f"topoq_test_{os.getpid()}_{next(self._numbers)}"
        with self.admin() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return f"{self.base_url}/{name}"

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _server_binaries() -> Path | None:
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start_throwaway(binaries: Path) -> PostgresServer:
    """initdb + pg_ctl start in a temporary directory (as ``postgres`` when we are root)."""
    root = Path(tempfile.mkdtemp(prefix="topoq-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVER_USER)  # made by the Debian package
        os.chown(root, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", SERVER_USER, "--"]
    data, port = root / "data", _free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)

    initdb, pg_ctl = str(binaries / "initdb"), str(binaries / "pg_ctl")
    run(
        initdb,
        "-D",
        str(data),
        "-A",
        "trust",
        "-U",
        "topoq",
        "--no-sync",
        "-E",
        "UTF8",
        "--locale=C",
    )
    settings = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(pg_ctl, "-D", str(data), "-o", settings, "-l", str(root / "log"), "-w", "start")

    def stop() -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)

    return PostgresServer(f"postgresql://topoq@127.0.0.1:{port}", stop=stop)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    given = os.environ.get(POSTGRES_URL_ENV)
    if given:
        base, _, database = given.replace("postgresql+psycopg://", "postgresql://").rpartition("/")
        yield PostgresServer(base, admin_database=database or "postgres")
        return
    binaries = _server_binaries()
    if binaries is None:
        reason = f"no PostgreSQL: set {POSTGRES_URL_ENV} or install the postgresql package"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = _start_throwaway(binaries)
    yield server
    server.stop()


@dataclass
class StoreLocation:
    """Where a test's store lives; ``open()`` opens another store on the same database."""

    url: str | None
    data_dir: Path

    def open(self) -> SqlStore:
        return open_store(self.url, self.data_dir)


@pytest.fixture(params=BACKENDS)
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLocation]:
    if request.param == "sqlite":
        yield StoreLocation(None, tmp_path)
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_database()
    yield StoreLocation(url, tmp_path)
    server.drop_database(url)


@pytest.fixture
def store(store_location: StoreLocation) -> Iterator[SqlStore]:
    opened = store_location.open()
    yield opened
    opened.close()
