"""SQLite writers of different processes queue on one file lock (and are woken in turn)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from topoq.store.database import connect, resolve_url
from topoq.store.process_lock import ProcessWriteLock

TAKE_LOCK = """
import sys
from pathlib import Path
from topoq.store.process_lock import ProcessWriteLock
with ProcessWriteLock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("acquired")
"""


def test_a_second_process_waits_for_the_lock_and_gets_it_once_released(tmp_path: Path) -> None:
    lock_path, marker = tmp_path / "db.write-lock", tmp_path / "acquired"
    lock = ProcessWriteLock(lock_path)
    with lock:
        other = subprocess.Popen([sys.executable, "-c", TAKE_LOCK, str(lock_path), str(marker)])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and other.poll() is None:
            time.sleep(0.05)
        assert other.poll() is None and not marker.exists()  # it waits while this one holds
    assert other.wait(timeout=30) == 0 and marker.read_text() == "acquired"
    with lock:  # the lock can be taken again by its owner
        pass


def test_sqlite_writes_of_every_process_share_the_lock_beside_the_database(tmp_path: Path) -> None:
    database = connect(resolve_url(None, tmp_path))
    try:
        assert isinstance(database.write_lock, ProcessWriteLock)
        assert database.write_lock.path == tmp_path / "topoq.db.write-lock"
    finally:
        database.engine.dispose()


def test_a_warmed_up_database_keeps_its_pool_full_of_open_connections(tmp_path: Path) -> None:
    database = connect(resolve_url(None, tmp_path))
    try:
        assert database.engine.pool.checkedin() == 0  # type: ignore[attr-defined]
        database.open_connections()
        kept = database.engine.pool.size()  # type: ignore[attr-defined]
        assert kept > 1 and database.engine.pool.checkedin() == kept  # type: ignore[attr-defined]
    finally:
        database.dispose()
