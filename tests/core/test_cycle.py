"""The scheduling cycle, rule by rule, on a 1 spine × 2 blocks × 4 nodes cluster (64 GPUs)."""

from __future__ import annotations

from dataclasses import replace

from topoq.core.cycle import Snapshot, schedule
from topoq.core.tree import build_tree
from topoq.domain.decisions import PendingReason, PreemptionCause
from topoq.domain.governance import PreemptTeamTasks, QueueingStrategy, SharingStrategy
from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase
from topoq.testing.builders import BLOCK
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [1, 2, 4]
CLASSES = {"inference": 100, "training": 10, "experiment": 1}


def test_jobs_within_guarantee_and_within_borrow_limit_are_admitted() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32, borrow_gpus=16), team("b", 32)),
        job("a1", "a", 4),
        job("a2", "a", 2),
    )
    c.cycle()
    assert c.running() == {"a1", "a2"}
    admitted = {a.job: a.allocation for a in c.last.admissions}
    assert not admitted[JobId("a1")].borrowed
    assert (
        admitted[JobId("a2")]
        .borrowed[next(iter(admitted[JobId("a2")].borrowed))]
        .amount("nvidia.com/gpu")
        == 16
    )


def test_borrowing_past_the_limit_waits_with_the_numbers() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32, borrow_gpus=8), team("b", 32)),
        job("a1", "a", 4),
        job("a2", "a", 2),
    )
    c.cycle()
    assert c.running() == {"a1"}
    assert c.reason("a2") == PendingReason.BORROW_LIMIT_REACHED
    message = next(d.message for d in c.last.diagnostics if d.job == "a2")
    assert "uses 32/32 nvidia.com/gpu of its p5.48xlarge guarantee and 0/8 borrowed" in message
    assert "16 nvidia.com/gpu" in message


def test_dont_lend_and_lend_teams_never_borrow() -> None:
    for sharing in (SharingStrategy.DONT_LEND, SharingStrategy.LEND):
        c = Cluster.of(
            SHAPE,
            policy(team("a", 16, sharing=sharing), team("b", 48)),
            job("a1", "a", 2),
            job("a2", "a", 1),
        )
        c.cycle()
        assert c.running() == {"a1"}
        assert c.reason("a2") == PendingReason.WAITING_FOR_QUOTA


def test_dont_lend_team_keeps_its_unused_guarantee() -> None:
    c = Cluster.of(
        SHAPE,
        policy(
            team("a", 32, sharing=SharingStrategy.DONT_LEND),
            team("b", 32, borrow_gpus=32),
            idle_sharing=False,
        ),
        job("b1", "b", 4),
        job("b2", "b", 1),
    )
    c.cycle()
    assert c.running() == {"b1"}
    assert c.reason("b2") == PendingReason.NO_LENDER_HAS_ROOM


def test_idle_capacity_owned_by_no_team_is_borrowable_only_when_sharing_is_on() -> None:
    for sharing, expected in ((True, {"a1", "a2"}), (False, {"a1"})):
        c = Cluster.of(
            SHAPE,
            policy(team("a", 16, borrow_gpus=48), idle_sharing=sharing),
            job("a1", "a", 2),
            job("a2", "a", 4),
        )
        c.cycle()
        assert c.running() == expected


def test_lender_reclaims_its_guarantee_from_borrowers_within_one_cycle() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32), team("b", 32, borrow_gpus=32)),
        job("b1", "b", 4),
        job("b2", "b", 4),
    )
    c.cycle()
    assert c.running() == {"b1", "b2"}
    c.now = 10
    c.submit(job("a1", "a", 4, required=BLOCK))
    c.cycle()
    [preempt] = c.last.preemptions
    assert preempt.cause is PreemptionCause.PREEMPTED_FOR_RECLAIM
    assert preempt.for_job == "a1"
    assert c.reason("a1") == PendingReason.WAITING_FOR_VICTIMS
    c.now = 11
    c.cycle()
    assert "a1" in c.running()
    victim = preempt.victim
    assert c.phase(victim) is JobPhase.PENDING
    assert c.jobs[victim].preemptions == 1


def test_reclaim_evicts_the_lowest_priority_then_most_recent_borrower() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32), team("b", 32, borrow_gpus=32), classes=CLASSES),
        job("b1", "b", 2, priority="training"),
        job("b2", "b", 2, priority="experiment"),
    )
    c.cycle()
    c.now = 5
    c.submit(job("b3", "b", 2, priority="experiment"), job("b4", "b", 2, priority="training"))
    c.cycle()
    assert c.running() == {"b1", "b2", "b3", "b4"}
    c.now = 10
    c.submit(job("a1", "a", 2))
    c.cycle()
    assert [p.victim for p in c.last.preemptions] == ["b3"]


def low_priority_work_and_a_higher_priority_job_of_its_team() -> Cluster:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32, sharing=SharingStrategy.LEND), team("b", 32), classes=CLASSES),
        job("low", "a", 4, priority="experiment"),
    )
    c.cycle()
    c.now = 1
    c.submit(job("high", "a", 4, priority="inference"))
    return c


def test_higher_priority_job_preempts_its_own_teams_lower_priority_work() -> None:
    c = low_priority_work_and_a_higher_priority_job_of_its_team()
    c.cycle()
    [preempt] = c.last.preemptions
    assert (preempt.victim, preempt.cause) == ("low", PreemptionCause.PREEMPTED_FOR_PRIORITY)
    c.cycle()
    assert c.running() == {"high"}


def test_never_preempt_team_waits_and_equal_priority_is_never_preempted() -> None:
    never = team("a", 32, sharing=SharingStrategy.LEND, preempt=PreemptTeamTasks.NEVER)
    c = Cluster.of(
        SHAPE,
        policy(never, team("b", 32), classes=CLASSES),
        job("low", "a", 4, priority="experiment"),
    )
    c.cycle()
    c.submit(job("high", "a", 4, priority="inference"), job("peer", "a", 4, priority="experiment"))
    c.cycle()
    assert not c.last.preemptions
    assert c.reason("high") == PendingReason.WAITING_FOR_QUOTA


def test_victims_free_room_inside_one_block_not_scattered_gpus() -> None:
    # b borrows 6 single-node jobs: 4 fill block b0, 2 sit in block b1. a needs a whole block.
    jobs = [job(f"b{i}", "b", 1) for i in range(6)]
    c = Cluster.of(SHAPE, policy(team("a", 32), team("b", 16, borrow_gpus=48)), *jobs)
    c.cycle()
    block_of = {
        j: c.jobs[JobId(j)].allocation.placement.pod_sets[0].assignments[0].domain[BLOCK]  # type: ignore[union-attr]
        for j in c.running()
    }
    c.now = 1
    c.submit(job("a1", "a", 4, required=BLOCK))
    c.cycle()
    victims = sorted(p.victim for p in c.last.preemptions)
    assert len(victims) == 2
    assert {block_of[v] for v in victims} == {"b1"}
    c.cycle()
    assert "a1" in c.running()
    allocation = c.jobs[JobId("a1")].allocation
    assert allocation is not None
    assert {a.domain[BLOCK] for a in allocation.placement.pod_sets[0].assignments} == {"b1"}


def test_nobody_is_evicted_when_no_victim_set_makes_the_gang_fit() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 64), team("b", 0, borrow_gpus=64)), job("b1", "b", 1))
    c.cycle()
    c.submit(job("a1", "a", 5, required=BLOCK))  # 5 nodes: more than a block has
    c.cycle()
    assert not c.last.preemptions
    assert c.reason("a1") == PendingReason.NEVER_FITS_CURRENT_POLICY  # no block is that big


def test_work_inside_its_own_guarantee_is_never_evicted_for_another_team() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32), team("b", 32, borrow_gpus=32)),
        job("b1", "b", 4),
        job("a1", "a", 4),
    )
    c.cycle()
    c.submit(job("a2", "a", 1))
    c.cycle()
    assert not c.last.preemptions
    assert c.phase("b1") is JobPhase.RUNNING
    # a2 could borrow (team a's borrow limit has room) but b lends nothing: b1 uses exactly
    # b's guarantee, and work inside its own guarantee is not reclaimable
    assert c.reason("a2") == PendingReason.NO_LENDER_HAS_ROOM


def test_a_gang_on_a_failed_node_is_requeued() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 64)), job("a1", "a", 2))
    c.cycle()
    allocation = c.jobs[JobId("a1")].allocation
    assert allocation is not None
    lost = sorted(allocation.nodes)[0]
    nodes = [replace(n, ready=False) if n.name == lost else n for n in c.tree.nodes]
    c.tree = build_tree(nodes, c.tree.spec)
    c.now = 5
    c.cycle()
    [requeue] = c.last.requeues
    assert requeue.job == "a1" and lost in requeue.message
    assert c.phase("a1") is JobPhase.PENDING
    c.cycle()
    assert c.phase("a1") is JobPhase.RUNNING
    new_allocation = c.jobs[JobId("a1")].allocation
    assert new_allocation is not None and lost not in new_allocation.nodes


def test_dependencies_wait_then_run_or_are_cancelled() -> None:
    after_ok = (Dependency(DependencyKind.AFTER_OK, JobId("first")),)
    after_any = (Dependency(DependencyKind.AFTER_ANY, JobId("first")),)
    c = Cluster.of(
        SHAPE,
        policy(team("a", 64)),
        job("first", "a", 1),
        job("ok", "a", 1, depends=after_ok),
        job("any", "a", 1, depends=after_any),
    )
    c.cycle()
    assert c.running() == {"first"}
    assert c.reason("ok") == PendingReason.WAITING_ON_DEPENDENCY
    c.finish("first", JobPhase.FAILED)
    c.cycle()
    assert c.phase("ok") is JobPhase.CANCELLED
    assert "after-ok first: it ended failed" in c.jobs[JobId("ok")].history[-1].cause
    assert c.phase("any") is JobPhase.RUNNING


def test_held_jobs_and_unknown_teams_wait_with_their_reason() -> None:
    held = replace(job("h", "a", 1), held=True)
    c = Cluster.of(SHAPE, policy(team("a", 64)), held, job("x", "nobody", 1))
    c.cycle()
    assert c.reason("h") == PendingReason.HELD
    assert c.reason("x") == PendingReason.UNKNOWN_TEAM


def test_strict_fifo_head_blocks_the_rest_of_its_team() -> None:
    strict = team("a", 16, borrow_gpus=0, queueing=QueueingStrategy.STRICT_FIFO)
    c = Cluster.of(
        SHAPE, policy(strict, team("b", 48)), job("big", "a", 3, at=0), job("small", "a", 1, at=1)
    )
    c.cycle()
    assert c.reason("big") == PendingReason.NEVER_FITS_CURRENT_POLICY  # 24 > 16 + 0 GPUs
    assert c.reason("small") == PendingReason.BLOCKED_BY_QUEUE_HEAD
    relaxed = Cluster.of(
        SHAPE,
        policy(replace(strict, queueing=QueueingStrategy.BEST_EFFORT_FIFO), team("b", 48)),
        job("big", "a", 3, at=0),
        job("small", "a", 1, at=1),
    )
    relaxed.cycle()
    assert relaxed.running() == {"small"}


def test_a_gang_waiting_for_room_holds_its_block_against_small_jobs() -> None:
    fillers = [job(f"x{i}", "a", 1) for i in range(8)]
    c = Cluster.of(SHAPE, policy(team("a", 64)), *fillers)
    c.cycle()
    node_of = {j: sorted(c.jobs[JobId(j)].allocation.nodes)[0] for j in c.running()}  # type: ignore[union-attr]
    c.finish("x0")  # one free node in block b0 (n00-n03) …
    c.finish("x4")  # … and one in block b1 (n04-n07)
    c.now = 1
    c.submit(job("gang", "a", 2, required=BLOCK))
    c.cycle()
    assert c.reason("gang") == PendingReason.TOPOLOGY_UNSATISFIABLE
    held = next(d for d in c.last.diagnostics if d.job == "gang").numbers["reserved_domain"]
    assert held == "s0/b0"
    c.now = 2
    c.submit(job("small", "a", 1), job("small2", "a", 1))
    c.cycle()
    assert c.jobs[JobId("small")].allocation.nodes == {node_of["x4"]}  # type: ignore[union-attr]
    assert c.reason("small2") == PendingReason.RESERVED_FOR_LARGER_GANG
    c.finish("x1")
    c.now = 3
    c.cycle()
    assert "gang" in c.running()


def test_a_head_waiting_for_quota_holds_it_against_its_teams_smaller_jobs() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 32, borrow_gpus=0), team("b", 32)), job("old", "a", 2))
    c.cycle()
    c.now = 1
    c.submit(job("head", "a", 3))
    c.now = 2
    c.submit(job("small", "a", 1))
    c.cycle()
    assert c.reason("head") == PendingReason.BORROW_LIMIT_REACHED
    assert c.reason("small") == PendingReason.RESERVED_FOR_LARGER_GANG
    assert "holds quota for head" in next(d.message for d in c.last.diagnostics if d.job == "small")
    c.finish("old")
    c.cycle()
    assert "head" in c.running()


def test_the_same_snapshot_gives_the_same_decisions() -> None:
    jobs = [job(f"j{i}", "ab"[i % 2], 1 + i % 3, at=i) for i in range(8)]
    c = Cluster.of(SHAPE, policy(team("a", 32), team("b", 32)), *jobs)
    snapshot = Snapshot(0.0, c.tree, tuple(c.jobs.values()), c.policy)
    assert schedule(snapshot) == schedule(snapshot)
