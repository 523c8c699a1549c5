"""Jobs in tables: a ``jobs`` row per job and its append-only ``job_events`` history, read back
as ``JobView``s and written with optimistic concurrency (the row's ``version``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from sqlalchemy import ColumnElement, Row, Select, Table, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import FINISHED_PHASES, JobId, JobPhase, JobSpec, JobView, PhaseChange
from topoq.engine.ports import UnknownJob
from topoq.store import write_seq
from topoq.store.codec import (
    decode_allocation,
    decode_job_spec,
    encode_allocation,
    encode_job_spec,
)
from topoq.store.errors import ConcurrentUpdate
from topoq.store.job_cache import JobCache, KnownJob
from topoq.store.records import JobEvent, JobRecord
from topoq.store.schema import JobEventRow, JobRow
from topoq.store.write_seq import take_turn

ACTIVE_PHASES = tuple(phase.value for phase in JobPhase if phase not in FINISHED_PHASES)
"""Pending, admitted, running and preempting: the jobs a cycle looks at."""
HOLDING_PHASES = tuple(phase.value for phase in JobPhase if phase.holds_capacity)
IN_LIST_CHUNK = 500
"""Ids per ``IN (...)`` list, well under every backend's limit on bound parameters."""
SUBMITTED = "submitted"
JOBS: Final = cast(Table, JobRow.__table__)
JOB_EVENTS: Final = cast(Table, JobEventRow.__table__)
"""The Core tables: inserts with their values as parameters compile once and are cached
(``insert(JobRow).values(...)`` builds a new statement and its cache key per call)."""

STORED_IDS: Final = select(JobRow.id).where(JobRow.id.in_(bindparam("ids", expanding=True)))
"""Built once: building the statement costs more than running it (a primary-key lookup)."""
STORED_PHASES: Final = select(JobRow.id, JobRow.phase).where(
    JobRow.id.in_(bindparam("ids", expanding=True))
)
STORED_DIAGNOSTICS: Final = select(JobRow.id, JobRow.diagnostic).where(
    JobRow.id.in_(bindparam("ids", expanding=True)), JobRow.diagnostic.is_not(None)
)

VIEW_COLUMNS = (
    JobRow.id,
    JobRow.phase,
    JobRow.allocation,
    JobRow.admitted_at,
    JobRow.started_at,
    JobRow.failures,
    JobRow.preemptions,
    JobRow.preempted_for,
    JobRow.held,
    JobRow.version,
    JobRow.attempt,
    JobRow.updated_at,
    JobRow.history_length,
    JobRow.previous_nodes,
)
"""What ``records_of`` selects: everything but the spec, which is read (and decoded) only for
jobs the store's ``JobCache`` does not know."""
ONE_VERSION: Final = select(JobRow.version).where(JobRow.id == bindparam("id"))
ONE_ROW: Final = select(*VIEW_COLUMNS, JobRow.spec).where(JobRow.id == bindparam("id"))
ONE_HISTORY: Final = (
    select(JobEventRow.at, JobEventRow.phase, JobEventRow.cause)
    .where(JobEventRow.job_id == bindparam("id"), JobEventRow.seq < bindparam("length"))
    .order_by(JobEventRow.seq)
)
"""``read_one``'s statements, built once."""
LATEST_WRITE: Final = select(func.max(JobRow.write_seq))
JOB_WRITES_LOCK_KEY = 0x7070_7131
"""PostgreSQL advisory lock a transaction holds from its first write of job rows to its end,
so that such writes take turns there as they do on SQLite (``store/write_seq.py``)."""
TAKE_TURN_TO_WRITE_JOBS: Final = take_turn(JOB_WRITES_LOCK_KEY)


def next_write_seq(connection: Connection) -> int:
    """The ``write_seq`` of the job rows this transaction writes (``store/write_seq.py``)."""
    return write_seq.next_write_seq(connection, JobRow.write_seq, JOB_WRITES_LOCK_KEY)


def chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), IN_LIST_CHUNK):
        yield ids[start : start + IN_LIST_CHUNK]


# --- reading ------------------------------------------------------------------------------
def job_filters(
    team: str | Collection[str] | None,
    phase: JobPhase | Collection[JobPhase] | None,
    user: str | None,
) -> list[ColumnElement[bool]]:
    """The ``where`` of a job list: every filter given (a collection matches any member)."""
    filters: list[ColumnElement[bool]] = []
    if team is not None:
        filters.append(JobRow.team.in_([team] if isinstance(team, str) else sorted(team)))
    if phase is not None:
        phases = [phase] if isinstance(phase, JobPhase) else sorted(phase)
        filters.append(JobRow.phase.in_([p.value for p in phases]))
    if user is not None:
        filters.append(JobRow.user_name == user)
    return filters


def read_records(
    connection: Connection, where: Iterable[ColumnElement[bool]], cache: JobCache | None = None
) -> dict[JobId, JobRecord]:
    """The jobs matching ``where`` with their histories by id, oldest submission first. With
    a ``cache``, only the ids and versions are read for every job, and the rows of the jobs
    whose remembered record is not at that version (the controller reads every unfinished
    job each step: per unchanged job this is a row of two columns and a lookup)."""
    order = (JobRow.submitted_at, JobRow.id)
    if cache is None:
        query = select(*VIEW_COLUMNS).where(*where).order_by(*order)
        return {r.view.id: r for r in records_of(connection, query)}
    ids_versions: Sequence[Any] = connection.execute(  # ids taken as JobIds, no call per row
        select(JobRow.id, JobRow.version).where(*where).order_by(*order)
    ).all()
    known = cache.get(job_id for job_id, _ in ids_versions)
    current: dict[JobId, JobRecord] = {}
    stale: list[str] = []
    for job_id, version in ids_versions:
        entry = known.get(job_id)
        record = None if entry is None else entry.record_at(version)
        if record is None:
            stale.append(job_id)
        else:
            current[job_id] = record
    for part in chunks(stale):
        query = select(*VIEW_COLUMNS).where(JobRow.id.in_(part))
        current.update((r.view.id, r) for r in records_of(connection, query, cache))
    return {job_id: current[job_id] for job_id, _ in ids_versions}


def records_of(
    connection: Connection, query: Select[Any], cache: JobCache | None = None
) -> list[JobRecord]:
    """Records for the job rows ``query`` selects (``VIEW_COLUMNS``), with their specs and
    histories: from ``cache`` when it knows them whole, else read (and then remembered)."""
    rows = connection.execute(query).all()
    known = cache.get(row.id for row in rows) if cache is not None else {}
    specs = {job_id: entry.spec for job_id, entry in known.items()}
    specs.update(read_specs(connection, [row.id for row in rows if row.id not in known]))
    histories = {
        row.id: known[row.id].history
        for row in rows
        if row.id in known and len(known[row.id].history) == row.history_length
    }
    histories.update(read_histories(connection, [r.id for r in rows if r.id not in histories]))
    records = [record_from_row(row, specs[row.id], histories.get(row.id, ())) for row in rows]
    if cache is not None:
        cache.put({r.view.id: KnownJob(r.view.spec, r.view.history, r) for r in records})
    return records


def read_specs(connection: Connection, job_ids: Sequence[str]) -> dict[str, JobSpec]:
    specs: dict[str, JobSpec] = {}
    for part in chunks(job_ids):
        query = select(JobRow.id, JobRow.spec).where(JobRow.id.in_(part))
        specs.update((row.id, decode_job_spec(row.spec)) for row in connection.execute(query))
    return specs


def read_histories(
    connection: Connection, job_ids: Sequence[str]
) -> dict[str, tuple[PhaseChange, ...]]:
    changes: dict[str, list[PhaseChange]] = defaultdict(list)
    for part in chunks(job_ids):
        query = (
            select(JobEventRow.job_id, JobEventRow.at, JobEventRow.phase, JobEventRow.cause)
            .where(JobEventRow.job_id.in_(part))
            .order_by(JobEventRow.job_id, JobEventRow.seq)
        )
        for row in connection.execute(query):
            changes[row.job_id].append(PhaseChange(row.at, JobPhase(row.phase), row.cause))
    return {job_id: tuple(history) for job_id, history in changes.items()}


def record_from_row(row: Row[Any], spec: JobSpec, history: tuple[PhaseChange, ...]) -> JobRecord:
    view = JobView(
        spec=spec,
        phase=JobPhase(row.phase),
        history=history,
        allocation=None if row.allocation is None else decode_allocation(row.allocation),
        admitted_at=row.admitted_at,
        started_at=row.started_at,
        failures=row.failures,
        preemptions=row.preemptions,
        held=row.held,
        preempted_for=None if row.preempted_for is None else JobId(row.preempted_for),
        previous_nodes=frozenset(row.previous_nodes or ()),
    )
    return JobRecord(view, row.version, row.attempt, row.updated_at)


def read_one(connection: Connection, job_id: str, cache: JobCache | None = None) -> JobRecord:
    """One job; raises UnknownJob. Needs no snapshot, so it can run without a transaction:
    what a second statement reads cannot disagree with the row read first — the spec never
    changes, and the history entries below the row's ``history_length`` were written with the
    row and never change. With a ``cache`` that remembers the job at its stored version, one
    statement (the version); a job read for the first time, two (row with spec, history)."""
    known = cache.get([job_id]).get(job_id) if cache is not None else None
    if known is not None and known.record is not None:
        version = connection.execute(ONE_VERSION, {"id": job_id}).scalar_one_or_none()
        record = None if version is None else known.record_at(version)
        if record is not None:
            return record
    row = connection.execute(ONE_ROW, {"id": job_id}).one_or_none()
    if row is None:
        raise UnknownJob(f"no job has the id {job_id!r}")
    spec = known.spec if known is not None else decode_job_spec(row.spec)
    if known is not None and len(known.history) == row.history_length:
        history = known.history
    else:
        entries = connection.execute(ONE_HISTORY, {"id": job_id, "length": row.history_length})
        history = tuple(PhaseChange(e.at, JobPhase(e.phase), e.cause) for e in entries)
    record = record_from_row(row, spec, history)
    if cache is not None:
        cache.put({job_id: KnownJob(spec, history, record)})
    return record


def event_from_row(row: Row[Any]) -> JobEvent:
    return JobEvent(
        job=JobId(row.job_id),
        team=row.team,
        seq=row.seq,
        at_s=row.at,
        phase=JobPhase(row.phase),
        cause=row.cause,
        allocation=None if row.allocation is None else decode_allocation(row.allocation),
    )


# --- writing ------------------------------------------------------------------------------
def insert_jobs(connection: Connection, new: Sequence[tuple[JobSpec, float]]) -> list[JobView]:
    """Insert new pending jobs, each ``(spec, now)`` with its first history entry (submitted):
    one multi-row insert for the rows and one for the entries. The ids must be free."""
    views = [(JobView(spec, history=(_submitted(now),)), now) for spec, now in new]
    if not views:
        return []
    seq = next_write_seq(connection)
    rows = [
        {
            "id": view.id,
            "team": view.team,
            "user_name": view.spec.user,
            "priority_class": view.spec.priority_class,
            "submitted_at": view.spec.submitted_at,
            "spec": encode_job_spec(view.spec),
            "diagnostic": None,
            "version": 1,
            "write_seq": seq,
        }
        | _state_columns(view, now)
        for view, now in views
    ]
    connection.execute(insert(JOBS), rows)
    events = [row for view, _ in views for row in _event_rows(view, 0)]
    connection.execute(insert(JOB_EVENTS), events)
    return [view for view, _ in views]


def _submitted(now: float) -> PhaseChange:
    return PhaseChange(now, JobPhase.PENDING, SUBMITTED)


def stored_ids(connection: Connection, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are taken by stored jobs."""
    taken: set[str] = set()
    for part in chunks(ids):
        taken.update(connection.execute(STORED_IDS, {"ids": part}).scalars())
    return taken


def diagnostics_of(connection: Connection, ids: Sequence[str]) -> dict[JobId, Any]:
    """The stored diagnostic (as JSON) of each job among ``ids`` that has one."""
    found: dict[JobId, Any] = {}
    for part in chunks(ids):
        for row in connection.execute(STORED_DIAGNOSTICS, {"ids": part}):
            found[JobId(row.id)] = row.diagnostic
    return found


def phases_of(connection: Connection, ids: Sequence[str]) -> dict[JobId, JobPhase]:
    """The phase of each stored job among ``ids``."""
    phases: dict[JobId, JobPhase] = {}
    for part in chunks(ids):
        for row in connection.execute(STORED_PHASES, {"ids": part}):
            phases[JobId(row.id)] = JobPhase(row.phase)
    return phases


def _state_columns(view: JobView, now: float) -> dict[str, Any]:
    """The columns that change as the job moves (everything but the spec)."""
    allocation = view.allocation
    return {
        "phase": view.phase.value,
        "held": view.held,
        "failures": view.failures,
        "preemptions": view.preemptions,
        "preempted_for": view.preempted_for,
        "attempt": view.attempt,
        "history_length": len(view.history),
        "allocation": None if allocation is None else encode_allocation(allocation),
        "admitted_at": view.admitted_at,
        "started_at": view.started_at,
        "updated_at": now,
    }


def _event_rows(view: JobView, start: int) -> list[dict[str, Any]]:
    """Rows for history entries ``start…``; the latest ``admitted`` one carries the allocation
    while the job holds it."""
    booked = max(
        (seq for seq, change in enumerate(view.history) if change.phase is JobPhase.ADMITTED),
        default=None,
    )
    allocation = None if view.allocation is None else encode_allocation(view.allocation)
    return [
        {
            "job_id": view.id,
            "seq": seq,
            "team": view.team,
            "at": change.at_s,
            "phase": change.phase.value,
            "cause": change.cause,
            "allocation": allocation if seq == booked and view.phase.holds_capacity else None,
        }
        for seq, change in enumerate(view.history)
        if seq >= start
    ]


@dataclass(frozen=True)
class StoredState:
    version: int
    history_length: int


def update_jobs(
    connection: Connection,
    changed: Sequence[JobView],
    expected: Mapping[JobId, int],
    now: float,
) -> dict[JobId, int]:
    """Write every changed job and its new history entries; returns the new versions.

    A job is written only if its row still has the version ``expected`` names (the one its
    writer read), else ``ConcurrentUpdate``. A job without an expected version must at least
    extend the stored history (same length and same last entry)."""
    ids = [view.id for view in changed]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(
            "a job appears twice in one save", hint="pass each changed job once, latest first"
        )
    if not changed:
        return {}
    seq = next_write_seq(connection)  # before any row is locked: no deadlock on it
    stored = _stored_states(connection, ids)
    versions: dict[JobId, int] = {}
    events: list[dict[str, Any]] = []
    for view in changed:
        state = stored.get(view.id)
        if state is None:
            raise UnknownJob(f"no job has the id {view.id!r}")
        _check_not_stale(connection, view, state, expected.get(view.id))
        versions[view.id] = _update_row(connection, view, state, now, seq)
        events.extend(_event_rows(view, state.history_length))
    if events:
        connection.execute(insert(JOB_EVENTS), events)
    return versions


def _stored_states(connection: Connection, ids: Sequence[str]) -> dict[str, StoredState]:
    states: dict[str, StoredState] = {}
    for part in chunks(ids):
        query = select(JobRow.id, JobRow.version, JobRow.history_length).where(JobRow.id.in_(part))
        for row in connection.execute(query):
            states[row.id] = StoredState(row.version, row.history_length)
    return states


def _check_not_stale(
    connection: Connection, view: JobView, state: StoredState, expected: int | None
) -> None:
    if expected is not None and expected != state.version:
        raise ConcurrentUpdate(
            f"job {view.id} was changed by another writer after it was read "
            f"(stored version {state.version}, read version {expected}); "
            "nothing was saved: read the job again and redo the change"
        )
    if state.history_length > len(view.history):
        raise ConcurrentUpdate(
            f"job {view.id} has {state.history_length} history entries stored but the change "
            f"carries {len(view.history)}; it was based on an older read. Nothing was saved: "
            "read the job again and redo the change"
        )
    if expected is None and state.history_length:
        last = connection.execute(
            select(JobEventRow.at, JobEventRow.phase).where(
                JobEventRow.job_id == view.id, JobEventRow.seq == state.history_length - 1
            )
        ).one()
        mine = view.history[state.history_length - 1]
        if (last.at, last.phase) != (mine.at_s, mine.phase.value):
            raise ConcurrentUpdate(
                f"job {view.id}: its stored history diverges from the change at entry "
                f"{state.history_length - 1}; another writer moved it. Nothing was saved"
            )


def _update_row(
    connection: Connection, view: JobView, state: StoredState, now: float, seq: int
) -> int:
    values = _state_columns(view, now) | {"version": state.version + 1, "write_seq": seq}
    values["previous_nodes"] = sorted(view.previous_nodes) or None  # null when a job is new
    if view.phase is not JobPhase.PENDING:
        values["diagnostic"] = None  # why it waited no longer applies
    result = connection.execute(
        update(JobRow).where(JobRow.id == view.id, JobRow.version == state.version).values(values)
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            f"job {view.id} was changed by another writer during this save; nothing was saved"
        )
    return state.version + 1
