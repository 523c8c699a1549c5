"""Server tests that run on PostgreSQL too use the store tests' throwaway server; the
restart tests share a server process on a data directory of its own, whose pods sleep long
(``server``: a test module may define its own)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.harness import ServerProcess, kill_pods
from tests.store.conftest import postgres_server

__all__ = ["postgres_server", "server"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", run_id=uuid.uuid4().hex, pod_sleep_s=600.0)
    process.data_dir.mkdir()
    try:
        yield process
    finally:
        process.stop()
        kill_pods(process.run_id)
