"""A gang's previous nodes (set when a node failure requeues it) survive the store."""

from __future__ import annotations

from dataclasses import replace

from topoq.domain.job import JobId
from topoq.store import SqlStore
from topoq.testing.governance import job, policy, team


def test_previous_nodes_are_stored_and_read_back(store: SqlStore) -> None:
    store.save_policy(policy(team("llm", 8)), actor="test", now=0.0)
    view = store.add_job(job("g", "llm").spec, actor="alice", now=1.0)
    assert view.previous_nodes == frozenset()
    store.save_jobs([replace(view, previous_nodes=frozenset({"n02", "n01"}))], now=2.0)
    assert store.job(JobId("g")).previous_nodes == {"n01", "n02"}
    assert store.jobs()[JobId("g")].previous_nodes == {"n01", "n02"}
    store.save_jobs([replace(store.job(JobId("g")), previous_nodes=frozenset())], now=3.0)
    assert store.job(JobId("g")).previous_nodes == frozenset()
