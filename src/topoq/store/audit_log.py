"""The audit log in a table: append-only entries, ordered by ``id`` (newest first when read).
The store writes no entry by itself; the caller that makes a change says who made it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.engine import Connection

from topoq.engine.ports import AuditEntry
from topoq.store.schema import AuditRow

AUDIT_LOG: Final = cast(Table, AuditRow.__table__)


def insert_entries(connection: Connection, entries: Sequence[AuditEntry]) -> None:
    """Append the entries in order (one multi-row insert)."""
    if not entries:
        return
    rows = [
        {
            "at": entry.at_s,
            "actor": entry.actor,
            "action": entry.action,
            "target": entry.target,
            "detail": dict(entry.detail),
        }
        for entry in entries
    ]
    connection.execute(insert(AUDIT_LOG), rows)


def newest_entries(
    connection: Connection,
    limit: int,
    *,
    since_s: float | None = None,
    actor: str | None = None,
) -> list[AuditEntry]:
    """The newest ``limit`` entries, newest first: those at or after ``since_s`` and by
    ``actor`` when given."""
    query = select(AuditRow)
    if since_s is not None:
        query = query.where(AuditRow.at >= since_s)
    if actor is not None:
        query = query.where(AuditRow.actor == actor)
    query = query.order_by(AuditRow.id.desc()).limit(max(limit, 0))
    return [
        AuditEntry(row.at, row.actor, row.action, row.target, row.detail)
        for row in connection.execute(query)
    ]
