"""Where a row's last write falls among all writes of its table's rows: its ``write_seq``.

Writes of such rows take turns — SQLite runs one write transaction at a time (``BEGIN
IMMEDIATE``); on PostgreSQL a transaction takes an advisory lock of the table before its first
such write, before it locks any row (so it cannot deadlock on it), and holds it to its end — so
they commit in the order of their seqs: a reader that saw every write up to N sees any later
one as greater than N (``store/active_jobs.py``, ``inventory.KnownNodes``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import InstrumentedAttribute


def take_turn(lock_key: int) -> str:
    """The statement that takes the advisory lock ``lock_key`` until the transaction ends."""
    return f"SELECT pg_advisory_xact_lock({lock_key})"


def next_write_seq(
    connection: Connection, column: InstrumentedAttribute[Any], lock_key: int
) -> int:
    """The ``write_seq`` (``column``) of the rows this transaction writes: one past the latest
    stored, once it is this transaction's turn (PostgreSQL: the lock ``lock_key``)."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(take_turn(lock_key))
    return int(connection.execute(select(func.max(column))).scalar() or 0) + 1
