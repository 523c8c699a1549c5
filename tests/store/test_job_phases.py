"""``phases_of``: the phase of stored jobs by id, finished or not, on SQLite and PostgreSQL."""

from __future__ import annotations

from topoq.core.lifecycle import advance
from topoq.domain.job import JobId, JobPhase
from topoq.store import SqlStore
from topoq.store.job_rows import IN_LIST_CHUNK
from topoq.testing.governance import job


def test_phases_of_reads_finished_and_unfinished_jobs_and_leaves_unknown_ids_out(
    store: SqlStore,
) -> None:
    for name in ("done", "waiting"):
        store.add_job(job(name, "a", 1).spec, actor="test", now=1.0)
    done = advance(store.job(JobId("done")), JobPhase.CANCELLED, now=2.0, cause="cancelled")
    store.save_jobs([done], now=2.0)
    assert store.jobs().keys() == {"waiting"}  # the controller's read leaves the ended job out
    ids = [JobId("done"), JobId("waiting"), JobId("ghost")]
    assert store.phases_of(ids) == {"done": JobPhase.CANCELLED, "waiting": JobPhase.PENDING}
    assert store.phases_of([]) == {}


def test_phases_of_reads_more_ids_than_one_in_list_holds(store: SqlStore) -> None:
    store.add_job(job("last", "a", 1).spec, actor="test", now=1.0)
    ids = [JobId(f"absent-{n}") for n in range(IN_LIST_CHUNK + 5)] + [JobId("last")]
    assert store.phases_of(ids) == {"last": JobPhase.PENDING}
