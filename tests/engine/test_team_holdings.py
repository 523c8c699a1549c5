"""The teams' holdings kept job by job give the fractions ``held_fractions`` works out from all
holding jobs, as jobs start, are preempted, end and start again."""

from __future__ import annotations

from topoq.core.cycle import Snapshot, schedule
from topoq.core.fair_share import held_fractions
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.team_holdings import TeamHoldings
from topoq.testing.governance import gpu_cluster, job, policy, team


def _admitted() -> tuple[TopologyTree, ClusterPolicy, dict[JobId, JobView]]:
    """Two teams' one-GPU jobs after a cycle admitted what fits (team a borrowing)."""
    nodes, spec = gpu_cluster([2, 4])
    tree = build_tree(nodes, spec)
    rules = policy(team("a", 16, borrow_percent=100), team("b", 32), fair_share=True)
    jobs = {JobId(f"{t}{n}"): job(f"{t}{n}", t, pods=1) for t in "ab" for n in range(4)}
    result = schedule(Snapshot(0.0, tree, tuple(jobs.values()), rules))
    return tree, rules, apply_cycle(jobs, result, now=0.0, start_at_once=True)


def test_the_holdings_kept_job_by_job_give_the_fractions_of_all_holders() -> None:
    tree, rules, jobs = _admitted()
    holdings = TeamHoldings()
    for view in jobs.values():
        holdings.store(view)
    expected = held_fractions(rules, tree, jobs.values())
    assert expected and holdings.borrowed_fractions(rules, tree) == expected
    for moved, phase in ((JobId("a0"), JobPhase.SUCCEEDED), (JobId("a1"), JobPhase.PREEMPTING)):
        jobs[moved] = advance(jobs[moved], phase, now=60.0, cause="test")
        holdings.store(jobs[moved])
        assert holdings.borrowed_fractions(rules, tree) == held_fractions(
            rules, tree, jobs.values()
        )
    for view in jobs.values():
        if not view.phase.finished:
            holdings.store(advance(view, JobPhase.CANCELLED, now=120.0, cause="test"))
    assert holdings.borrowed_fractions(rules, tree) == {}


def test_holdings_synced_with_each_read_of_the_holders_give_the_fractions_of_all_holders() -> None:
    """The controller's step: each read of the jobs that hold capacity (views new or the very
    ones read before, jobs gone) gives the fractions worked out from all of them, also when
    the policy changes and the holders do not."""
    tree, rules, jobs = _admitted()
    holdings = TeamHoldings()

    def holders() -> dict[JobId, JobView]:
        return {k: v for k, v in jobs.items() if v.phase.holds_capacity}

    holdings.synced(holders())
    expected = held_fractions(rules, tree, jobs.values())
    assert expected and holdings.borrowed_fractions(rules, tree) == expected
    stricter = policy(team("a", 8, borrow_percent=100), team("b", 40), fair_share=True)
    assert (
        holdings.borrowed_fractions(stricter, tree)
        == held_fractions(stricter, tree, jobs.values())
        != expected
    )
    for moved, phase in ((JobId("a0"), JobPhase.SUCCEEDED), (JobId("a1"), JobPhase.PREEMPTING)):
        jobs[moved] = advance(jobs[moved], phase, now=60.0, cause="test")
        holdings.synced(holders())
        assert holdings.borrowed_fractions(rules, tree) == held_fractions(
            rules, tree, jobs.values()
        )
    holdings.synced({})
    assert holdings.borrowed_fractions(rules, tree) == {}
