"""Durable state: SQLAlchemy 2 on SQLite (default, WAL) or PostgreSQL, Alembic migrations.

``open_store(url, data_dir)`` returns a ``SqlStore`` (the engine's ``Store`` port and the
queries the API needs) with its schema migrated; see docs/store.md.
"""

from topoq.store.errors import ConcurrentUpdate, DuplicateToken, StoreUnavailable, UnknownToken
from topoq.store.records import (
    DecisionKind,
    DecisionRecord,
    JobEvent,
    JobRecord,
    PolicyVersion,
    TokenRecord,
)
from topoq.store.sql_store import SqlStore, open_store

__all__ = [
    "ConcurrentUpdate",
    "DecisionKind",
    "DecisionRecord",
    "DuplicateToken",
    "JobEvent",
    "JobRecord",
    "PolicyVersion",
    "SqlStore",
    "StoreUnavailable",
    "TokenRecord",
    "UnknownToken",
    "open_store",
]
