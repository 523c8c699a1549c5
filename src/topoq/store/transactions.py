"""How the store runs its work on the database: a read transaction (one snapshot), a single
read without a transaction, or a write transaction; database failures become
``StoreUnavailable``, and a connection a restarted server dropped is replaced and the work
run again, once.

No connection is pinged when the pool hands it out (``pool_pre_ping`` would cost a round trip
per request). A connection the server closed (PostgreSQL restarted, an administrator ended the
session) fails on its first statement instead; SQLAlchemy recognises the disconnect
(``DBAPIError.connection_invalidated``), discards that connection and every other one opened
before the failure, and the work is run again on a new one. That is always safe for reads. A
write is run again only when the failure came before COMMIT was sent: the server then rolled
the transaction back with the session. When COMMIT itself fails the outcome is unknown, and
``CommitFailed`` says so instead of writing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from topoq.store.database import Database
from topoq.store.errors import StoreUnavailable, first_line

T = TypeVar("T")
Work = Callable[[Connection], T]

ATTEMPTS = 2
"""A first try and, after a dropped connection, one more on a fresh one."""


class CommitFailed(StoreUnavailable):
    """The database failed while committing: the transaction may or may not be stored."""


class Transactions:
    def __init__(self, database: Database) -> None:
        self.database = database

    def read(self, work: Work[T]) -> T:
        """``work`` in one read transaction: every statement sees the same snapshot
        (PostgreSQL: REPEATABLE READ; SQLite: one read transaction)."""
        return self._run(self.database.reader, work, nullcontext(), writes=False)

    def query(self, work: Work[T]) -> T:
        """``work`` without a transaction: each statement is its own snapshot and no
        BEGIN or COMMIT is sent (one round trip for one statement). For work whose statements
        need not agree, or that reads only what never changes once written."""
        return self._run(self.database.querier, work, nullcontext(), writes=False)

    def write(self, work: Work[T]) -> T:
        """``work`` in one write transaction, under the database's write lock. Raises
        ``CommitFailed`` when the commit itself failed."""
        return self._run(self.database.writer, work, self.database.write_lock, writes=True)

    def _run(
        self, engine: Engine, work: Work[T], lock: AbstractContextManager[object], *, writes: bool
    ) -> T:
        for attempt in range(1, ATTEMPTS + 1):
            committing = False
            try:
                with lock, engine.begin() as connection:
                    result = work(connection)
                    committing = writes
                return result
            except DBAPIError as error:
                dropped = error.connection_invalidated and not committing
                if dropped and attempt < ATTEMPTS:
                    continue  # the pool has replaced the dropped connections: run it again
                if committing:
                    raise CommitFailed(self._failed("failed while committing", error)) from None
                if isinstance(error, OperationalError):
                    raise StoreUnavailable(self._failed("failed", error)) from None
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _failed(self, what: str, error: DBAPIError) -> str:
        return f"the database {self.database.display_url} {what}: {first_line(error)}"
