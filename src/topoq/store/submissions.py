"""Submissions in tables, many per transaction: the jobs of a batch (``Submission``s that
``GroupCommit`` gathered from concurrent ``add_job`` calls) and their audit entries, written
with one multi-row insert per table. Each entry's outcome is its own: an id already stored or
taken by an earlier entry of the batch is a ``DuplicateJob`` for that entry alone, and when
the batch's transaction fails, the entries are committed one by one so that a failing entry
fails alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from topoq.domain.job import JobSpec, JobView
from topoq.engine.ports import AuditEntry, DuplicateJob
from topoq.store import audit_log, job_rows
from topoq.store.errors import StoreUnavailable
from topoq.store.transactions import CommitFailed, Transactions


@dataclass(frozen=True)
class Submission:
    spec: JobSpec
    now: float
    audit: AuditEntry | None = None


def duplicate(spec: JobSpec) -> DuplicateJob:
    return DuplicateJob(f"job {spec.id} was already submitted")


def insert_submissions(
    connection: Connection, batch: Sequence[Submission]
) -> list[JobView | DuplicateJob]:
    """Store each entry's job (pending, history: submitted) and audit entry, in batch order;
    an entry whose id is taken (stored, or by an earlier entry) writes nothing. A lone entry
    is not looked up first: its insert raises IntegrityError when the id is taken."""
    ids = [entry.spec.id for entry in batch]
    taken = job_rows.stored_ids(connection, ids) if len(batch) > 1 else set()
    accepted: list[Submission] = []
    outcomes: list[DuplicateJob | None] = []
    for entry in batch:
        if entry.spec.id in taken:
            outcomes.append(duplicate(entry.spec))
        else:
            taken.add(entry.spec.id)
            accepted.append(entry)
            outcomes.append(None)
    views = iter(job_rows.insert_jobs(connection, [(e.spec, e.now) for e in accepted]))
    audit_log.insert_entries(connection, [e.audit for e in accepted if e.audit is not None])
    return [next(views) if outcome is None else outcome for outcome in outcomes]


class SubmissionWriter:
    """The group commit's leader work: ``commit(batch)`` gives each entry its outcome."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    def commit(self, batch: Sequence[Submission]) -> list[JobView | Exception]:
        """The batch in one transaction. When that fails, each entry in a transaction of its
        own, so that an entry that fails fails alone — unless the commit itself failed, which
        may have stored the batch: then nothing is redone."""
        try:
            return [*self._transactions.write(lambda c: insert_submissions(c, batch))]
        except CommitFailed as error:
            return [_commit_unknown(entry, error) for entry in batch]
        except Exception as error:
            if len(batch) == 1:
                return [self._error_of(batch[0], error)]
        return self._one_by_one(batch)

    def _one_by_one(self, batch: Sequence[Submission]) -> list[JobView | Exception]:
        outcomes: list[JobView | Exception] = []
        for entry in batch:
            if outcomes and isinstance(outcomes[-1], StoreUnavailable):
                outcomes.append(_unavailable(entry, outcomes[-1]))  # no use trying each
            else:
                outcomes.extend(self.commit([entry]))
        return outcomes

    def _error_of(self, entry: Submission, error: Exception) -> Exception:
        """What the caller of a submission that failed alone gets: DuplicateJob when its id
        is taken (stored before, or by another process meanwhile), else the error itself."""
        if not isinstance(error, IntegrityError):
            return error
        taken = self._transactions.query(lambda c: job_rows.stored_ids(c, [entry.spec.id]))
        return duplicate(entry.spec) if taken else error


def _commit_unknown(entry: Submission, error: CommitFailed) -> CommitFailed:
    return CommitFailed(
        f"job {entry.spec.id}: {error}; it may or may not be stored: submit it again "
        "(DuplicateJob then means it was)"
    )


def _unavailable(entry: Submission, error: StoreUnavailable) -> StoreUnavailable:
    return StoreUnavailable(f"job {entry.spec.id} was not stored: {error}")
