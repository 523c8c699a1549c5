"""The teams' holdings kept job by job give the fractions ``held_fractions`` works out from all
holding jobs, as jobs start, are preempted, end and start again."""

from __future__ import annotations

from topoq.core.cycle import Snapshot, schedule
from topoq.core.fair_share import held_fractions
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import build_tree
from topoq.domain.job import JobId, JobPhase
from topoq.sim.holdings import TeamHoldings
from topoq.testing.governance import gpu_cluster, job, policy, team


def test_the_holdings_kept_job_by_job_give_the_fractions_of_all_holders() -> None:
    nodes, spec = gpu_cluster([2, 4])
    tree = build_tree(nodes, spec)
    rules = policy(team("a", 16, borrow_percent=100), team("b", 32), fair_share=True)
    jobs = {f"{t}{n}": job(f"{t}{n}", t, pods=1) for t in "ab" for n in range(4)}
    result = schedule(Snapshot(0.0, tree, tuple(jobs.values()), rules))
    jobs = apply_cycle(jobs, result, now=0.0, start_at_once=True)  # type: ignore[assignment]
    holdings = TeamHoldings()
    for view in jobs.values():
        holdings.store(view)
    expected = held_fractions(rules, tree, jobs.values())
    assert expected and holdings.borrowed_fractions(rules, tree) == expected
    for moved, phase in (("a0", JobPhase.SUCCEEDED), ("a1", JobPhase.PREEMPTING)):
        jobs[moved] = advance(jobs[JobId(moved)], phase, now=60.0, cause="test")
        holdings.store(jobs[moved])
        assert holdings.borrowed_fractions(rules, tree) == held_fractions(
            rules, tree, jobs.values()
        )
    for view in jobs.values():
        if not view.phase.finished:
            holdings.store(advance(view, JobPhase.CANCELLED, now=120.0, cause="test"))
    assert holdings.borrowed_fractions(rules, tree) == {}
