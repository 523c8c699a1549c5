"""The victim searches of one cycle share a budget of trial placements: a search it cuts short
evicts nobody, its job says so, and the next cycle searches again (ADR 0007)."""

from __future__ import annotations

from topoq.core.cycle import Snapshot, schedule
from topoq.core.cycle.run import run_cycle
from topoq.domain.decisions import PendingReason, PreemptionCause
from topoq.domain.governance import SharingStrategy
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [1, 2, 4]
CLASSES = {"inference": 100, "experiment": 1}


def cluster_with_low_priority_work() -> Cluster:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 32, sharing=SharingStrategy.LEND), team("b", 32), classes=CLASSES),
        job("low", "a", 4, priority="experiment"),
    )
    c.cycle()
    c.now = 1
    c.submit(job("high", "a", 4, priority="inference"))
    return c


def test_a_search_the_budget_cuts_short_evicts_nobody_and_says_so() -> None:
    c = cluster_with_low_priority_work()
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    result, _ = run_cycle(snapshot, trial_placements=0)
    assert not result.preemptions
    [waiting] = [d for d in result.diagnostics if d.job == "high"]
    assert waiting.reason is PendingReason.WAITING_FOR_QUOTA
    assert waiting.numbers["preemption_search"] == "deferred"
    assert "search budget was spent" in waiting.message
    [preempt] = schedule(snapshot).preemptions  # with the budget the cycle has, it evicts
    assert (preempt.victim, preempt.cause) == ("low", PreemptionCause.PREEMPTED_FOR_PRIORITY)


def test_a_search_within_the_budget_decides_as_an_unbounded_one() -> None:
    c = cluster_with_low_priority_work()
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    bounded, _ = run_cycle(snapshot, trial_placements=8)
    assert bounded == schedule(snapshot)
