"""Saves are all or nothing, and two writers never silently overwrite each other."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from tests.store.conftest import StoreLocation
from topoq.core.lifecycle import advance
from topoq.domain.decisions import CycleResult, Diagnostic, PendingReason
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.ports import DuplicateJob, UnknownJob
from topoq.store import ConcurrentUpdate, SqlStore
from topoq.store import sql_store as sql_store_module
from topoq.testing.governance import job

A, B = JobId("a"), JobId("b")


def submit(store: SqlStore, *ids: JobId) -> list[JobView]:
    return [store.add_job(job(i, "llm").spec, actor="alice", now=1.0) for i in ids]


def cancelled(view: JobView, now: float = 2.0) -> JobView:
    return advance(view, JobPhase.CANCELLED, now=now, cause="cancelled by alice")


def snapshot(store: SqlStore) -> tuple[object, ...]:
    """Everything a failed save could have touched."""
    jobs = store.jobs(include_finished=True)
    records = [store.job_record(job_id) for job_id in sorted(jobs)]
    histories = [store.job_history(job_id) for job_id in sorted(jobs)]
    return (records, histories, store.decisions(), [store.diagnostic(j) for j in sorted(jobs)])


def test_a_save_that_fails_on_its_second_job_writes_nothing(store: SqlStore) -> None:
    a, _ = submit(store, A, B)
    before = snapshot(store)
    ghost = replace(a, spec=replace(a.spec, id=JobId("ghost")))
    with pytest.raises(UnknownJob, match="ghost"):
        store.save_jobs([cancelled(a), ghost], now=2.0)
    assert snapshot(store) == before


def test_a_save_that_fails_while_recording_decisions_writes_nothing(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = submit(store, A, B)
    before = snapshot(store)

    def crash(*_: object) -> None:
        raise RuntimeError("the process died half-way")

    monkeypatch.setattr(sql_store_module, "record_cycle", crash)
    diagnostic = Diagnostic(B, PendingReason.WAITING_FOR_QUOTA, "no quota")
    with pytest.raises(RuntimeError, match="half-way"):
        store.save_jobs(
            [cancelled(a), replace(b, held=True)],
            now=2.0,
            decisions=CycleResult(diagnostics=(diagnostic,)),
        )
    assert snapshot(store) == before


def test_a_writer_that_read_an_older_version_is_refused(store_location: StoreLocation) -> None:
    with store_location.open() as server_one, store_location.open() as server_two:
        (view,) = submit(server_one, A)
        seen_by_two = server_two.job(A)
        server_one.save_jobs([replace(view, held=True)], now=2.0)
        with pytest.raises(ConcurrentUpdate, match="another writer"):
            server_two.save_jobs([cancelled(seen_by_two)], now=3.0)
        assert server_one.job(A) == replace(view, held=True)
        server_two.save_jobs([cancelled(server_two.job(A))], now=4.0)  # after a fresh read
        assert server_one.job(A).phase is JobPhase.CANCELLED


def test_two_threads_sharing_one_store_do_not_overwrite_each_other(store: SqlStore) -> None:
    (view,) = submit(store, A)
    loop_view = store.job(A)  # the controller's thread read it

    def api_request() -> None:  # another thread reads and saves in between
        store.save_jobs([replace(store.job(A), held=True)], now=2.0)

    worker = threading.Thread(target=api_request)
    worker.start()
    worker.join()
    with pytest.raises(ConcurrentUpdate):
        store.save_jobs([cancelled(loop_view)], now=3.0)
    assert store.job(A) == replace(view, held=True)


def test_explicit_expected_versions_guard_writers_that_read_elsewhere(store: SqlStore) -> None:
    submit(store, A)
    record = store.job_record(A)
    store.save_jobs([replace(record.view, held=True)], now=2.0)
    with pytest.raises(ConcurrentUpdate):
        store.save_jobs([cancelled(record.view)], now=3.0, expected_versions={A: record.version})


def test_a_writer_that_never_read_the_job_must_extend_its_stored_history(
    store_location: StoreLocation,
) -> None:
    with store_location.open() as first, store_location.open() as stranger:
        (view,) = submit(first, A)
        first.save_jobs([cancelled(view, now=2.0)], now=2.0)
        diverging = advance(view, JobPhase.ADMITTED, now=5.0, cause="admitted")
        with pytest.raises(ConcurrentUpdate):
            stranger.save_jobs([diverging], now=5.0)
        with pytest.raises(ConcurrentUpdate):
            stranger.save_jobs([view], now=5.0)  # shorter than what is stored
        assert first.job(A).phase is JobPhase.CANCELLED


def test_one_of_two_concurrent_submissions_of_an_id_wins(store_location: StoreLocation) -> None:
    with store_location.open() as one, store_location.open() as two:
        submit(one, A)
        with pytest.raises(DuplicateJob):
            submit(two, A)
        assert len(two.jobs()) == 1


def test_a_save_of_the_same_job_twice_is_refused(store: SqlStore) -> None:
    (view,) = submit(store, A)
    with pytest.raises(InvalidInputError, match="twice"):
        store.save_jobs([view, cancelled(view)], now=2.0)
