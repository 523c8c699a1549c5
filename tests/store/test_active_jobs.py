"""The unfinished jobs a store reads are brought up to date by the rows written since its last
read (``store/active_jobs.py``): whatever is written, by this store or another one on the same
database, from one thread or several at once, the read is the one a full read gives — the same
jobs, the same values, oldest submission first."""

from __future__ import annotations

import random
import threading
from dataclasses import replace

from sqlalchemy import text

from tests.store.conftest import StoreLocation
from topoq.core.lifecycle import advance
from topoq.domain.job import FINISHED_PHASES, JobId, JobPhase, JobView
from topoq.store import SqlStore
from topoq.testing.governance import job


def read_whole(store: SqlStore) -> list[tuple[JobId, JobView]]:
    """The unfinished jobs as a full read finds them, oldest submission first."""
    every = store.jobs(include_finished=True).values()
    unfinished = [one for one in every if one.phase not in FINISHED_PHASES]
    return [(one.id, one) for one in sorted(unfinished, key=lambda j: (j.spec.submitted_at, j.id))]


def test_a_read_after_any_writes_is_the_full_read(store_location: StoreLocation) -> None:
    """Two stores on one database: one writes (submissions, some submitted before jobs already
    stored; holds and releases; cancellations), the other reads after each write."""
    rng = random.Random(7)
    with store_location.open() as writer, store_location.open() as reader:
        known: dict[JobId, JobView] = {}
        for step in range(60):
            choice = rng.random()
            if choice < 0.4 or not known:
                name = JobId(f"j{step:02d}-{rng.choice('abz')}")
                spec = replace(job(name, "llm").spec, submitted_at=float(rng.randint(0, 30)))
                known[name] = writer.add_job(spec, actor="alice", now=float(step))
            else:
                name = rng.choice(sorted(known))
                current = writer.job(name)
                if current.phase in FINISHED_PHASES:
                    continue
                if choice < 0.6:
                    moved = advance(current, JobPhase.CANCELLED, now=float(step), cause="cancel")
                else:
                    moved = replace(current, held=not current.held)
                writer.save_jobs([moved], now=float(step))
            assert list(reader.jobs().items()) == read_whole(writer)


def test_writes_from_several_threads_at_once_are_all_read(store_location: StoreLocation) -> None:
    """Writers that commit at the same moment take turns for their seqs: a reader reading all
    the while misses none of their writes."""
    with store_location.open() as setup:
        for index in range(40):
            setup.add_job(job(JobId(f"w{index:02d}"), "llm").spec, actor="alice", now=0.0)
    stores = [store_location.open() for _ in range(3)]
    reader, writers = stores[0], stores[1:]
    done = threading.Event()

    def write(store: SqlStore, names: list[JobId]) -> None:
        for name in names:  # held, released, held, then cancelled
            for moves in range(4):
                current = store.job(name)
                moved = (
                    replace(current, held=not current.held)
                    if moves < 3
                    else advance(current, JobPhase.CANCELLED, now=1.0, cause="cancelled")
                )
                store.save_jobs([moved], now=1.0)  # each job has one writer: never refused

    def read() -> None:
        while not done.is_set():
            reader.jobs()

    names = [JobId(f"w{index:02d}") for index in range(40)]
    threads = [threading.Thread(target=read)] + [
        threading.Thread(target=write, args=(store, names[part::2]))
        for part, store in enumerate(writers)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads[1:]:
            thread.join()
        done.set()
        threads[0].join()
        assert list(reader.jobs().items()) == read_whole(writers[0])
        assert not reader.jobs(), "every job was cancelled"
    finally:
        done.set()
        for store in stores:
            store.close()


def test_a_database_older_than_the_last_read_is_read_whole(store: SqlStore) -> None:
    """A database restored from a backup has an older latest write than the one the store
    read last: the store reads it whole instead of trusting what it read."""
    first = store.add_job(job(JobId("a"), "llm").spec, actor="alice", now=1.0)
    store.add_job(job(JobId("b"), "llm").spec, actor="alice", now=2.0)
    assert list(store.jobs()) == ["a", "b"]
    with store.database.writer.begin() as connection:  # as the backup had it
        connection.execute(text("UPDATE jobs SET write_seq = 0"))
        connection.execute(text("UPDATE jobs SET phase = 'succeeded' WHERE id = 'b'"))
    assert store.jobs() == {JobId("a"): first}
