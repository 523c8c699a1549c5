"""The victim searches of one cycle share a budget of trial placements: a search it cuts short
evicts nobody, its job says so, and the next cycle searches again (ADR 0007)."""

from __future__ import annotations

from tests.core.test_cycle import low_priority_work_and_a_higher_priority_job_of_its_team
from topoq.core.cycle import Snapshot, schedule
from topoq.core.cycle.run import run_cycle
from topoq.domain.decisions import PendingReason, PreemptionCause


def test_a_search_the_budget_cuts_short_evicts_nobody_and_says_so() -> None:
    c = low_priority_work_and_a_higher_priority_job_of_its_team()
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
    c = low_priority_work_and_a_higher_priority_job_of_its_team()
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    bounded, _ = run_cycle(snapshot, trial_placements=8)
    assert bounded == schedule(snapshot)
