"""The victim searches of one cycle share a budget of trial placements: a search it cuts short
evicts nobody, its job says so, and the next cycle searches again (ADR 0007)."""

from __future__ import annotations

from tests.core.test_cycle import low_priority_work_and_a_higher_priority_job_of_its_team
from topoq.core.cycle import Snapshot, schedule
from topoq.core.cycle.run import run_cycle
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.ledger import CapacityLedger
from topoq.core.preemption import TrialBudget, VictimSearch, select_victims
from topoq.core.quota import QuotaBook
from topoq.domain.decisions import PendingReason, PreemptionCause
from topoq.domain.job import JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL


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


def test_a_search_that_starts_with_the_budget_spent_tries_nothing() -> None:
    """Once the cycle's budget is spent, a later search returns at once: before, each still
    summed every candidate's holdings over every domain (a 16,384-node cycle took 88 s)."""
    c = low_priority_work_and_a_higher_priority_job_of_its_team()
    high, low = c.jobs["high"], c.jobs["low"]
    assert low.allocation is not None
    ledger = CapacityLedger.with_usage(c.tree, low.allocation.resources_on_node)
    book = QuotaBook(
        c.policy, capacity_by_flavor(c.tree, INSTANCE_TYPE_LABEL), usage_by_team([low])
    )
    [flavor] = low.allocation.usage
    search = VictimSearch(high, flavor, high.spec.workload)
    asked: list[str] = []

    def may_evict(victim: JobView, _: QuotaBook) -> bool:
        asked.append(victim.id)
        return True

    fresh = TrialBudget(8)
    assert select_victims(ledger, book, search, [low], may_evict, fresh) == [low]
    assert asked == ["low"] and not fresh.spent
    spent = TrialBudget(0)
    spent.take()  # the cycle's searches have spent it
    asked.clear()
    assert select_victims(ledger, book, search, [low], may_evict, spent) is None
    assert asked == [] and spent.spent
