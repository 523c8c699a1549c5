"""The lock every SQLite write transaction of every topoq process takes first.

SQLite lets one writer in at a time; a second one gets SQLITE_BUSY and its busy handler polls
with sleeps that grow to 100 ms. With the controller and the API in separate processes both
write, and a submission that arrived during a cycle's commit would sleep past it. Taking an
exclusive ``flock`` on a file beside the database first makes writers queue in the kernel
instead, and each is woken the moment the previous one commits. Threads of one process queue
on a thread lock before the file lock (a file lock belongs to the process, not the thread).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType


class ProcessWriteLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.Lock()
        self._descriptor: int | None = None

    def __enter__(self) -> ProcessWriteLock:
        self._threads.acquire()
        try:
            if self._descriptor is None:
                self._descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._descriptor, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._descriptor is not None:
                fcntl.flock(self._descriptor, fcntl.LOCK_UN)
        finally:
            self._threads.release()
