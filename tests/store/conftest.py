"""Store tests run on SQLite and on PostgreSQL.

PostgreSQL: ``TOPOQ_TEST_POSTGRES_URL`` (a user that may CREATE DATABASE) if set; otherwise a
throwaway cluster made with the server binaries of the distribution's package
(``/usr/lib/postgresql/*/bin``), started on a free localhost port for the session and removed
after it (``topoq.testing.postgres``). Without either, the PostgreSQL cases are skipped — except
under CI, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from topoq.store import SqlStore, open_store
from topoq.testing.postgres import (
    POSTGRES_URL_ENV,
    PostgresServer,
    given_server,
    server_binaries,
    start_throwaway,
)

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    given = given_server()
    if given is not None:
        yield given
        return
    binaries = server_binaries()
    if binaries is None:
        reason = f"no PostgreSQL: set {POSTGRES_URL_ENV} or install the postgresql package"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = start_throwaway(binaries)
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
