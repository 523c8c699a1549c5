"""What the store remembers to answer fast — verified tokens, the latest policy, decoded jobs —
never hides a change: a revocation, a new policy version or another writer's move shows at
once; and a submission and its audit entry are written together or not at all."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.store.conftest import StoreLocation
from topoq.core.lifecycle import advance
from topoq.domain.job import JobId, JobPhase
from topoq.engine.ports import AuditEntry, DuplicateJob
from topoq.store import SqlStore
from topoq.store import sql_store as sql_store_module
from topoq.testing.governance import job, policy, team

A = JobId("a")


def test_a_revoked_token_is_refused_at_once_though_it_was_just_verified(store: SqlStore) -> None:
    secret, record = store.create_token("alice", "member", ["llm"], now=1.0)
    assert store.token_for(secret) == record
    assert store.cached_token(secret) == record, "a verified token is remembered"
    store.revoke_token(record.id, now=2.0)
    assert store.cached_token(secret) is None
    assert store.token_for(secret) is None


def test_a_verified_token_is_asked_for_again_after_a_while(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret, _ = store.create_token("alice", "member", ["llm"], now=1.0)
    monkeypatch.setattr(sql_store_module, "TOKEN_CACHE_S", 0.0)
    store.token_for(secret)
    assert store.cached_token(secret) is None


def test_a_new_policy_version_is_read_at_once(store: SqlStore) -> None:
    first, second = policy(team("llm", 8)), policy(team("llm", 8), team("vision", 8))
    store.save_policy(first, actor="admin", now=1.0)
    assert store.policy() == first
    store.save_policy(second, actor="admin", now=2.0)
    assert store.policy() == second


def test_a_policy_saved_elsewhere_is_read_after_the_recheck_interval(
    store_location: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store_module, "POLICY_RECHECK_S", 0.0)
    with store_location.open() as one, store_location.open() as two:
        one.save_policy(policy(team("llm", 8)), actor="admin", now=1.0)
        assert two.policy() == policy(team("llm", 8))
        one.save_policy(policy(team("vision", 8)), actor="admin", now=2.0)
        assert two.policy() == policy(team("vision", 8))


def test_a_job_moved_by_another_store_is_read_as_it_is_now(store_location: StoreLocation) -> None:
    with store_location.open() as one, store_location.open() as two:
        view = one.add_job(job(A, "llm").spec, actor="alice", now=1.0)
        assert two.jobs() == {A: view}
        cancelled = advance(view, JobPhase.CANCELLED, now=2.0, cause="cancelled by alice")
        one.save_jobs([cancelled], now=2.0)
        assert two.jobs(include_finished=True) == {A: cancelled}
        assert two.job(A) == cancelled
        held = replace(one.add_job(job(JobId("b"), "llm").spec, actor="a", now=3.0), held=True)
        one.save_jobs([held], now=4.0)
        assert two.list_jobs(phase=JobPhase.PENDING) == [held]


def test_a_submission_and_its_audit_entry_are_one_transaction(store: SqlStore) -> None:
    entry = AuditEntry(1.0, "alice", "submit", A, {"team": "llm"})
    store.add_job(job(A, "llm").spec, actor="alice", now=1.0, audit=entry)
    again = AuditEntry(2.0, "bob", "submit", A, {"team": "llm"})
    with pytest.raises(DuplicateJob):
        store.add_job(job(A, "llm").spec, actor="bob", now=2.0, audit=again)
    assert store.audit_log() == [entry]
