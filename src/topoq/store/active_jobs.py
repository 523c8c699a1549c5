"""The unfinished jobs as a store last read them, brought up to date by the rows written since.

Every write of job rows stamps them with the next ``write_seq`` (``job_rows.next_write_seq``),
and such writes take turns, so they commit in the order of their seqs. A reader that has seen
every write up to N therefore finds everything that changed since in the rows whose
``write_seq`` is greater than N: the controller's read of 10,000 unfinished jobs each step
costs the rows that changed (a few), not a row per job. Jobs are never deleted; a job that
finished is a written row like any other, and leaves. A database whose latest write is older
than the one seen (restored from a backup) is read whole again.

Jobs come in submission order (time, then id, compared as Python strings on every backend),
the order the cycle's snapshot takes them in."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.engine import Connection

from topoq.domain.job import FINISHED_PHASES, JobId
from topoq.store import job_rows
from topoq.store.job_cache import JobCache
from topoq.store.records import JobRecord
from topoq.store.schema import JobRow


class ActiveJobs:
    """Thread-safe: what it hands out is never changed afterwards (an update makes a new
    mapping), and of two readers the one that saw the later write is kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: Mapping[JobId, JobRecord] = {}
        self._seen: int | None = None
        """The latest write the records include (None: nothing read yet)."""

    def read(self, connection: Connection, cache: JobCache) -> Mapping[JobId, JobRecord]:
        """The unfinished jobs, in submission order (inside one read transaction)."""
        latest = int(connection.execute(job_rows.LATEST_WRITE).scalar() or 0)
        with self._lock:
            seen, records = self._seen, self._records
        if seen is None or latest < seen:
            active = [JobRow.phase.in_(job_rows.ACTIVE_PHASES)]
            records = _in_submission_order(job_rows.read_records(connection, active, cache))
        elif latest > seen:
            query = select(*job_rows.VIEW_COLUMNS).where(JobRow.write_seq > seen)
            records = _updated(records, job_rows.records_of(connection, query, cache))
        with self._lock:
            if self._seen is None or latest >= self._seen:
                self._records, self._seen = records, latest
        return records


def _submission(record: JobRecord) -> tuple[float, str]:
    return (record.view.spec.submitted_at, record.view.id)


def _in_submission_order(records: Mapping[JobId, JobRecord]) -> dict[JobId, JobRecord]:
    ordered = sorted(records.values(), key=_submission)
    return {record.view.id: record for record in ordered}


def _updated(
    records: Mapping[JobId, JobRecord], written: Iterable[JobRecord]
) -> Mapping[JobId, JobRecord]:
    """``records`` with the rows ``written`` since: changed jobs in place, finished ones out,
    new ones in their places (after the others, as new jobs mostly are)."""
    updated = dict(records)
    entrants = []
    for record in written:
        job = record.view
        if job.phase in FINISHED_PHASES:
            updated.pop(job.id, None)
        elif job.id in updated:
            updated[job.id] = record
        else:
            entrants.append(record)
    if not entrants:
        return updated
    entrants.sort(key=_submission)
    last = next(reversed(updated.values()), None)
    if last is None or _submission(last) < _submission(entrants[0]):
        updated.update((record.view.id, record) for record in entrants)
        return updated
    return _in_submission_order({**updated, **{r.view.id: r for r in entrants}})
