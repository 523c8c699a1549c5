"""What the store remembers to answer fast — verified tokens, the latest policy, decoded jobs
and nodes, the diagnostics it stored — never hides a change: a revocation, a new policy
version or another writer's move shows at once; and a submission and its audit entry are
written together or not at all."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from sqlalchemy import event

from tests.store.conftest import StoreLocation
from topoq.core.lifecycle import advance
from topoq.domain.decisions import CycleResult, Diagnostic, PendingReason
from topoq.domain.job import JobId, JobPhase
from topoq.engine.ports import AuditEntry, DuplicateJob
from topoq.store import DecisionKind, SqlStore
from topoq.store import sql_store as sql_store_module
from topoq.testing.governance import gpu_cluster, job, policy, team

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


def test_unchanged_nodes_are_handed_out_again_and_a_node_changed_elsewhere_is_read_anew(
    store_location: StoreLocation,
) -> None:
    nodes, _ = gpu_cluster([1, 1, 1, 3])
    with store_location.open() as one, store_location.open() as two:
        one.save_nodes(nodes, actor="admin", now=1.0)
        first = two.nodes()
        assert first == nodes
        again = two.nodes()
        assert all(a is b for a, b in zip(first, again, strict=True)), "decoded once"
        relabelled = replace(nodes[2], labels={**nodes[2].labels, "zone": "b"})
        one.save_nodes([nodes[0], nodes[1], relabelled], actor="admin", now=2.0)
        one.update_node(nodes[1].name, ready=False, now=3.0)
        now = two.nodes()
        assert now == [nodes[0], replace(nodes[1], ready=False), relabelled]
        assert now[0] is first[0] and now[1] is not first[1] and now[2] is not first[2]


def test_every_write_of_the_inventory_is_read_and_none_is_missed_by_writers_at_once(
    store_location: StoreLocation,
) -> None:
    """The inventory is handed out again while its count of nodes and latest write stand:
    a removal alone, a state change, and two stores' writes at the same moment each change
    what is read — the second writer waits for the first, so both are seen."""
    nodes, _ = gpu_cluster([2, 2, 2, 2])
    with store_location.open() as one, store_location.open() as two:
        one.save_nodes(nodes, actor="admin", now=1.0)
        assert two.nodes() == nodes
        one.save_nodes(nodes[:-1], actor="admin", now=2.0)  # a node removed, nothing else
        assert two.nodes() == nodes[:-1]
        one.update_node(nodes[0].name, unschedulable=True, now=3.0)
        assert two.nodes()[0] == replace(nodes[0], unschedulable=True)
        with store_location.open() as other:
            meanwhile = threading.Thread(
                target=lambda: (other.update_node(nodes[2].name, ready=False, now=4.0), two.nodes())
            )

            def other_writes_while_one_does(
                _c: object, _k: object, statement: str, *_: object
            ) -> None:
                if statement.startswith("UPDATE nodes") and not meanwhile.is_alive():
                    meanwhile.start()  # another store writes and is read while this one writes
                    meanwhile.join(timeout=0.5)  # it waits its turn (or, wrongly, is done)

            event.listen(one.database.engine, "before_cursor_execute", other_writes_while_one_does)
            one.update_node(nodes[1].name, ready=False, now=4.0)
            event.remove(one.database.engine, "before_cursor_execute", other_writes_while_one_does)
            meanwhile.join()
        assert [node.ready for node in two.nodes()] == [
            i not in (1, 2) for i in range(len(nodes) - 1)
        ]


def _waits(job_id: JobId, reason: PendingReason, free: int) -> Diagnostic:
    return Diagnostic(job_id, reason, f"{free} GPUs free", {"free": free})


def test_a_diagnostic_is_written_only_when_it_changed_and_logged_when_its_reason_did(
    store: SqlStore,
) -> None:
    store.add_job(job(A, "llm").spec, actor="alice", now=0.0)
    quota, topology = PendingReason.WAITING_FOR_QUOTA, PendingReason.TOPOLOGY_UNSATISFIABLE
    waits = _waits(A, quota, 8)
    for now, diagnostic in enumerate(
        [waits, waits, _waits(A, quota, 8), _waits(A, quota, 4), _waits(A, topology, 4)], 1
    ):
        store.save_jobs([], now=float(now), decisions=CycleResult(diagnostics=(diagnostic,)))
        assert store.diagnostic(A) == diagnostic
    logged = store.decisions(job=A)
    assert [(d.kind, d.detail["reason"]) for d in reversed(logged)] == [
        (DecisionKind.DIAGNOSTIC, quota.value),
        (DecisionKind.DIAGNOSTIC, topology.value),
    ]


def test_a_diagnostic_another_store_wrote_is_compared_with_the_row(
    store_location: StoreLocation,
) -> None:
    quota = PendingReason.WAITING_FOR_QUOTA
    with store_location.open() as one, store_location.open() as two:
        one.add_job(job(A, "llm").spec, actor="alice", now=0.0)
        one.save_jobs([], now=1.0, decisions=CycleResult(diagnostics=(_waits(A, quota, 8),)))
        two.save_jobs([], now=2.0, decisions=CycleResult(diagnostics=(_waits(A, quota, 8),)))
        assert len(two.decisions(job=A)) == 1, "read back: the same reason is not logged again"
        two.save_jobs([], now=3.0, decisions=CycleResult(diagnostics=(_waits(A, quota, 2),)))
        assert one.diagnostic(A) == _waits(A, quota, 2)
