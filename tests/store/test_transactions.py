"""How the store talks to its database: a job read by this store before costs one statement
and no transaction, a job read across another writer's change is never a mix of two versions,
and — on PostgreSQL, without pinging connections — a server that dropped every connection
costs no request, while a write whose COMMIT failed is reported, never written twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, event

from tests.store.conftest import StoreLocation
from topoq.core.lifecycle import advance
from topoq.domain.job import JobId, JobPhase
from topoq.store import SqlStore
from topoq.store.transactions import CommitFailed
from topoq.testing.governance import job

A = JobId("a")


@contextmanager
def statements_sent(engine: Engine) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_job_this_store_read_before_is_read_again_with_one_statement(store: SqlStore) -> None:
    view = store.add_job(job(A, "llm").spec, actor="alice", now=1.0)
    assert store.job_record(A).view == view
    with statements_sent(store.database.querier) as sent:
        record = store.job_record(A)
    assert record.view == view
    assert len(sent) == 1, f"no BEGIN, no COMMIT, no ping: {sent}"
    assert sent[0].lstrip().upper().startswith("SELECT")


def test_a_job_that_moves_while_it_is_read_is_read_at_one_version(
    store_location: StoreLocation,
) -> None:
    """The row is read first, its history after: entries the other writer appends meanwhile
    are past the row's history length and left out, so the record is the row's version."""
    with store_location.open() as store, store_location.open() as other:
        view = store.add_job(job(A, "llm").spec, actor="alice", now=1.0)
        moved: list[bool] = []

        def move_before_the_history_is_read(
            _conn: object, _cursor: object, statement: str, *_: object
        ) -> None:
            if "FROM job_events" in statement and not moved:
                moved.append(True)
                cancelled = advance(other.job(A), JobPhase.CANCELLED, now=2.0, cause="by bob")
                other.save_jobs([cancelled], now=2.0)

        fresh = SqlStore(store.database)  # remembers nothing: reads row, then history
        event.listen(
            store.database.querier, "before_cursor_execute", move_before_the_history_is_read
        )
        try:
            record = fresh.job_record(A)
        finally:
            event.remove(
                store.database.querier, "before_cursor_execute", move_before_the_history_is_read
            )
        assert moved
        assert record.view == view
        assert record.version == 1
        assert fresh.job(A).phase is JobPhase.CANCELLED  # read again: the new version, whole
        assert len(fresh.job(A).history) == 2


def drop_every_connection(url: str) -> int:
    """What a restarted server does to the sessions it had (here: ours, terminated)."""
    with psycopg.connect(
        url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as admin:
        found = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(found[0]) if found else 0


@pytest.fixture
def postgres(store_location: StoreLocation) -> Iterator[tuple[SqlStore, str]]:
    if store_location.url is None:
        pytest.skip("SQLite has no server to drop connections")
    with store_location.open() as store:
        yield store, store_location.url


def test_every_kind_of_call_goes_on_after_the_server_dropped_every_connection(
    postgres: tuple[SqlStore, str],
) -> None:
    store, url = postgres
    store.add_job(job(A, "llm").spec, actor="alice", now=1.0)
    store.job_record(A)
    store.jobs()
    assert drop_every_connection(url) >= 2, "the pools held connections"
    assert store.job(A).id == A  # a read without a transaction
    assert list(store.jobs()) == [A]  # a read transaction
    assert drop_every_connection(url) >= 1
    store.add_job(job(JobId("b"), "llm").spec, actor="alice", now=2.0)  # a group commit
    assert drop_every_connection(url) >= 1
    store.save_jobs([advance(store.job(A), JobPhase.CANCELLED, now=3.0, cause="x")], now=3.0)
    assert store.count_jobs() == 2
    assert store.job(A).phase is JobPhase.CANCELLED


def test_a_write_whose_commit_failed_is_reported_and_not_written_twice(
    postgres: tuple[SqlStore, str],
) -> None:
    store, url = postgres

    dropped: list[int] = []

    def drop_before_commit(_connection: Any) -> None:
        if not dropped:
            dropped.append(drop_every_connection(url))

    event.listen(store.database.engine, "commit", drop_before_commit)
    try:
        with pytest.raises(CommitFailed, match="may or may not be stored"):
            store.add_job(job(A, "llm").spec, actor="alice", now=1.0)
    finally:
        event.remove(store.database.engine, "commit", drop_before_commit)
    assert store.count_jobs() == 0  # the server dropped the session before its COMMIT
    store.add_job(job(A, "llm").spec, actor="alice", now=2.0)
    assert store.job(A).history[0].at_s == 2.0
