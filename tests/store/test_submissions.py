"""Submissions share transactions (group commit) without changing what each caller gets:
its job stored exactly once with its audit entry, DuplicateJob for a taken id, its own error
alone when its entry fails, and the versions its thread remembers — on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from sqlalchemy import event

from tests.store.conftest import StoreLocation
from tests.store.waiting import DEADLINE_S, wait_until
from topoq.core.lifecycle import advance
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView
from topoq.engine.ports import AuditEntry, DuplicateJob
from topoq.store import ConcurrentUpdate, SqlStore
from topoq.store.job_rows import TAKE_TURN_TO_WRITE_JOBS
from topoq.testing.governance import job

THREADS = 50
PER_THREAD = 10


def spec(job_id: str, at: float = 1.0, pods: int = 1) -> JobSpec:
    return job(job_id, "llm", pods, at=at).spec


def entry(job_id: str, at: float = 1.0) -> AuditEntry:
    return AuditEntry(at, "alice", "submit", job_id, {"team": "llm"})


def submit(store: SqlStore, submitted: JobSpec) -> JobView:
    at = submitted.submitted_at
    return store.add_job(submitted, actor="alice", now=at, audit=entry(submitted.id, at))


@dataclass(eq=False)
class Commits:
    """Counts the transactions committed on a store's engine; with ``hold_first``, the first
    one's commit waits until ``release`` (so that submissions made meanwhile queue)."""

    hold_first: bool = False
    count: int = 0

    def __post_init__(self) -> None:
        self.first_reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, _connection: object) -> None:
        self.count += 1
        if self.hold_first and not self.first_reached.is_set():
            self.first_reached.set()
            self.release.wait(timeout=DEADLINE_S)


@contextmanager
def counting_commits(store: SqlStore, *, hold_first: bool = False) -> Iterator[Commits]:
    commits = Commits(hold_first)
    event.listen(store.database.engine, "commit", commits)
    try:
        yield commits
    finally:
        commits.release.set()
        event.remove(store.database.engine, "commit", commits)


def submit_as_one_batch(
    store: SqlStore,
    specs: Sequence[JobSpec],
    then: Callable[[JobView], Any] | None = None,
) -> tuple[list[Any], int]:
    """Submit each spec from a thread of its own, in order, while a first submission holds
    the writer: they queue and share the next transaction. Returns each caller's outcome (what
    ``then(view)`` returned in its thread, or its error) and how many transactions committed."""
    outcomes: list[Any] = [None] * len(specs)

    def one(number: int) -> None:
        try:
            view = submit(store, specs[number])
            outcomes[number] = view if then is None else then(view)
        except Exception as error:
            outcomes[number] = error

    with counting_commits(store, hold_first=True) as commits:
        opener = threading.Thread(target=submit, args=(store, spec("opener")))
        opener.start()
        commits.first_reached.wait(timeout=DEADLINE_S)
        threads = [threading.Thread(target=one, args=(n,)) for n in range(len(specs))]
        for number, thread in enumerate(threads):
            thread.start()
            queued = number + 2  # the opener's entry, being committed, is still queued
            wait_until(lambda: store._submissions.queued >= queued, f"submission {number}")  # noqa: B023 used at once
        commits.release.set()
        for thread in [opener, *threads]:
            thread.join()
    return outcomes, commits.count


def test_many_threads_submitting_at_once_land_exactly_once_with_their_audit_entries(
    store: SqlStore,
) -> None:
    start = threading.Barrier(THREADS)
    returned: list[JobView] = []

    def client(number: int) -> None:
        start.wait()
        views = [submit(store, spec(f"j{number}-{i}", at=float(i))) for i in range(PER_THREAD)]
        returned.extend(views)

    with counting_commits(store) as commits:
        threads = [threading.Thread(target=client, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    submissions = THREADS * PER_THREAD
    assert len(returned) == submissions
    assert commits.count < submissions, "concurrent submissions share transactions"
    stored = store.jobs()
    assert stored == {view.id: view for view in returned}
    audited = [audit.target for audit in store.audit_log(limit=2 * submissions)]
    assert sorted(audited) == sorted(view.id for view in returned)
    assert all(len(store.job_history(view.id)) == 1 for view in returned[:: PER_THREAD + 1])


def test_submissions_queued_behind_a_commit_share_one_transaction(store: SqlStore) -> None:
    specs = [spec(f"j{n}") for n in range(20)]
    outcomes, commits = submit_as_one_batch(store, specs)
    assert commits == 2, "the opener's transaction, then one for all twenty"
    assert [view.id for view in outcomes] == [s.id for s in specs]
    assert store.count_jobs() == 21
    assert len(store.audit_log(limit=100)) == 21


def test_duplicates_in_a_batch_and_of_stored_jobs_fail_alone_and_the_first_wins(
    store: SqlStore,
) -> None:
    stored = submit(store, spec("stored", at=0.5))
    batch = [
        spec("a", at=1.0),
        spec("b", at=1.0),
        spec("a", at=2.0, pods=4),  # the same id later in the batch
        spec("stored", at=2.0, pods=4),
        spec("c", at=1.0),
    ]
    outcomes, commits = submit_as_one_batch(store, batch)
    assert commits == 2
    assert [type(outcome) for outcome in outcomes] == [
        JobView,
        JobView,
        DuplicateJob,
        DuplicateJob,
        JobView,
    ]
    assert "a was already submitted" in str(outcomes[2])
    assert store.job(JobId("a")) == outcomes[0]
    assert store.job(JobId("a")).spec == batch[0]
    assert store.job(JobId("stored")) == stored
    audited = [(audit.target, audit.at_s) for audit in store.audit_log(limit=100)]
    assert sorted(audited) == [("a", 1.0), ("b", 1.0), ("c", 1.0), ("opener", 1.0), ("stored", 0.5)]


def test_an_entry_that_fails_unexpectedly_fails_alone_and_the_others_land(
    store: SqlStore,
) -> None:
    def refuse_bad(
        _conn: object, _cursor: object, statement: str, parameters: Any, *_: object
    ) -> None:
        rows = parameters if isinstance(parameters, list) else [parameters]
        if statement.startswith("INSERT INTO jobs") and any("bad" in str(r) for r in rows):
            raise RuntimeError("the disk ate job bad")

    event.listen(store.database.engine, "before_cursor_execute", refuse_bad)
    try:
        outcomes, _ = submit_as_one_batch(store, [spec("a"), spec("bad"), spec("c")])
    finally:
        event.remove(store.database.engine, "before_cursor_execute", refuse_bad)
    assert isinstance(outcomes[1], RuntimeError)
    assert [outcomes[0].id, outcomes[2].id] == ["a", "c"]
    assert sorted(store.jobs()) == ["a", "c", "opener"]
    assert sorted(audit.target for audit in store.audit_log()) == ["a", "c", "opener"]


def test_a_submission_that_raced_another_process_is_a_duplicate_and_the_rest_land(
    store_location: StoreLocation,
) -> None:
    if store_location.url is None:
        pytest.skip("on SQLite the write transaction holds the database: no other writer races")
    with store_location.open() as store, store_location.open() as other:
        raced = threading.Event()

        def other_process_wins_b(
            _conn: object, _cursor: object, statement: str, parameters: Any, *_: object
        ) -> None:
            if statement == TAKE_TURN_TO_WRITE_JOBS and not raced.is_set():
                raced.set()  # our check is done, our insert not begun: the other goes first
                submit(other, spec("b", at=9.0))  # commits between our check and our insert

        event.listen(store.database.engine, "before_cursor_execute", other_process_wins_b)
        outcomes, _ = submit_as_one_batch(store, [spec("a"), spec("b"), spec("c")])
        assert raced.is_set()
        assert isinstance(outcomes[1], DuplicateJob)
        assert [outcomes[0].id, outcomes[2].id] == ["a", "c"]
        assert store.job(JobId("b")).spec.submitted_at == 9.0
        assert sorted(store.jobs()) == ["a", "b", "c", "opener"]


def test_each_submitter_remembers_the_version_of_its_job(store_location: StoreLocation) -> None:
    """A follower's thread (its job committed by another thread) is still refused a save
    based on its submission after another writer moved the job."""
    with store_location.open() as store, store_location.open() as other:

        def moved_elsewhere_then_saved(view: JobView) -> Exception | None:
            other.save_jobs([replace(other.job(view.id), held=True)], now=2.0)
            try:
                store.save_jobs([advance(view, JobPhase.CANCELLED, now=3.0, cause="x")], now=3.0)
            except ConcurrentUpdate as refused:
                return refused
            return None

        outcomes, _ = submit_as_one_batch(store, [spec("a"), spec("b")], moved_elsewhere_then_saved)
        assert all(isinstance(outcome, ConcurrentUpdate) for outcome in outcomes)
        assert all(store.job(JobId(i)).phase is JobPhase.PENDING for i in ("a", "b"))
