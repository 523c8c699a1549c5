"""Phase events for usage reports: the events of a time window and, for every job that held
capacity when the window began, the admission that booked what it held.

A job holds the allocation its ``admitted`` event booked until its next event that does not
hold capacity (``running`` continues the holding; ``topoq.core.usage``). So a job admitted
before the window that still held its GPUs at the window's start counts in the window even
when none of its events falls inside it: its admission must come with the window's events.

Which jobs held capacity at ``at_s``: those whose latest event before ``at_s`` is ``admitted``
or ``running``. Such a job either still holds capacity and has no event since (its row's phase
holds, its last event — ``seq = history_length - 1`` — is before ``at_s``), or it has an event
at or after ``at_s`` whose previous event is before ``at_s`` and holds. Both are found through
indexes — the rows' phase, the events' time from ``at_s`` on, then the primary key
``(job_id, seq)`` for the event before — never by reading every event before the window. The
cost follows the activity since ``at_s`` (for a window that ends now, about the window's own
events) and the jobs holding capacity now (at most what the cluster holds). History times
never go backwards along ``seq``, so exactly one event pair of a job straddles ``at_s``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, select, union_all
from sqlalchemy.engine import Connection
from sqlalchemy.orm import aliased

from topoq.domain.job import JobPhase
from topoq.store.job_rows import event_from_row
from topoq.store.records import JobEvent
from topoq.store.schema import JobEventRow, JobRow

HOLDING_PHASES = tuple(phase.value for phase in JobPhase if phase.holds_capacity)
ADMITTED = JobPhase.ADMITTED.value
TIME_ORDER = (JobEventRow.at, JobEventRow.job_id, JobEventRow.seq)


def events_between(
    connection: Connection, start_s: float, end_s: float, team: str | None
) -> list[JobEvent]:
    """Events with ``start_s <= at < end_s`` (of one team), in time order."""
    where = [JobEventRow.at >= start_s, JobEventRow.at < end_s, *_of_team(JobEventRow, team)]
    query = select(JobEventRow).where(*where).order_by(*TIME_ORDER)
    return [event_from_row(row) for row in connection.execute(query)]


def admissions_holding_at(connection: Connection, at_s: float, team: str | None) -> list[JobEvent]:
    """For every job (of one team) that held capacity at ``at_s`` — its latest event before
    ``at_s`` is ``admitted`` or ``running`` — the admission that began the holding (it carries
    the allocation), in time order."""
    held = union_all(_crossing(at_s, team), _holding_since_before(at_s, team)).subquery()
    admission = aliased(JobEventRow)
    admission_seq = (
        select(func.max(admission.seq))
        .where(
            admission.job_id == held.c.job_id,
            admission.seq <= held.c.last_seq,
            admission.phase == ADMITTED,
        )
        .scalar_subquery()
    )
    query = (
        select(JobEventRow)
        .join(held, and_(JobEventRow.job_id == held.c.job_id, JobEventRow.seq == admission_seq))
        .order_by(*TIME_ORDER)
    )
    return [event_from_row(row) for row in connection.execute(query)]


def _crossing(at_s: float, team: str | None) -> Select[str, int]:
    """Jobs with an event at or after ``at_s`` whose previous event, before ``at_s``, holds
    capacity: (job, that previous event's seq)."""
    after, before = aliased(JobEventRow), aliased(JobEventRow)
    return (
        select(after.job_id, before.seq.label("last_seq"))
        .join(before, and_(before.job_id == after.job_id, before.seq == after.seq - 1))
        .where(
            after.at >= at_s,
            *_of_team(after, team),
            before.at < at_s,
            before.phase.in_(HOLDING_PHASES),
        )
    )


def _holding_since_before(at_s: float, team: str | None) -> Select[str, int]:
    """Jobs holding capacity now whose latest event is before ``at_s``: (job, its seq)."""
    last = aliased(JobEventRow)
    last_seq = JobRow.history_length - 1
    return (
        select(JobRow.id.label("job_id"), last_seq.label("last_seq"))
        .join(last, and_(last.job_id == JobRow.id, last.seq == last_seq))
        .where(JobRow.phase.in_(HOLDING_PHASES), *_of_team(JobRow, team), last.at < at_s)
    )


def _of_team(table: Any, team: str | None) -> list[ColumnElement[bool]]:
    """``table.team == team`` unless every team is asked for (``table``: a row class or an
    alias of one)."""
    return [] if team is None else [table.team == team]
