"""The cycle on a cohort tree (1 spine × 2 blocks × 4 nodes, 64 GPUs): borrowing inside and
across sub-cohorts, a cohort's borrow limit, reclaim through two levels, closest cohort first."""

from __future__ import annotations

from topoq.domain.decisions import PendingReason, PreemptionCause
from topoq.domain.governance import SharingStrategy
from topoq.testing.governance import Cluster, cohort, job, policy, team

SHAPE = [1, 2, 4]


def org_policy(*extra_cohorts, **teams_extra):  # type: ignore[no-untyped-def]  # test builder
    """org/x: a (32) and a2 (0, borrows); org/y: b (0, borrows); lab: c (32, DontLend)."""
    return policy(
        team("a", 32, cohort=["org", "x"]),
        team("a2", 0, borrow_gpus=64, cohort=["org", "x"]),
        team("b", 0, borrow_gpus=64, cohort=["org", "y"]),
        team("c", 32, cohort=["lab"], sharing=SharingStrategy.DONT_LEND),
        cohorts=extra_cohorts,
        idle_sharing=False,
    )


def test_a_team_borrows_inside_its_sub_cohort_and_across_to_the_sibling() -> None:
    c = Cluster.of(SHAPE, org_policy())
    c.submit(
        *(job(f"a2-{i}", "a2", 1) for i in range(2)), *(job(f"b-{i}", "b", 1) for i in range(3))
    )
    c.cycle()
    # a lends its 32 GPUs: a2 borrows inside org/x, b across to org/y; c lends nothing
    assert c.running() == {"a2-0", "a2-1", "b-0", "b-1"}
    assert c.reason("b-2") == PendingReason.NO_LENDER_HAS_ROOM


def test_a_cohort_borrow_limit_caps_what_its_subtree_takes_from_outside() -> None:
    c = Cluster.of(SHAPE, org_policy(cohort(["org", "y"], borrow_gpus=8)))
    c.submit(*(job(f"b-{i}", "b", 1) for i in range(3)))
    c.cycle()
    assert c.running() == {"b-0"}
    assert c.reason("b-1") == PendingReason.BORROW_LIMIT_REACHED
    message = next(d.message for d in c.last.diagnostics if d.job == "b-1")
    assert "cohort org/y would take 16 nvidia.com/gpu from outside it" in message
    assert "over its borrow limit of 8 nvidia.com/gpu" in message
    c.submit(job("a2-0", "a2", 2))  # the limit of org/y does not bind org/x
    c.cycle()
    assert "a2-0" in c.running()


def full_cluster(c: Cluster, *borrowers: str) -> None:
    """c fills its 32 GPUs; the borrowers share the 32 a lends, in 8-GPU jobs."""
    each = 4 // len(borrowers)
    c.submit(*(job(f"c-{i}", "c", 1) for i in range(4)))
    c.submit(*(job(f"{t}-{i}", t, 1) for t in borrowers for i in range(each)))
    c.cycle()
    c.now = 1


def test_reclaim_through_two_levels_takes_back_what_went_to_the_sibling_cohort() -> None:
    c = Cluster.of(SHAPE, org_policy())
    full_cluster(c, "b")
    assert c.running() == {"c-0", "c-1", "c-2", "c-3", "b-0", "b-1", "b-2", "b-3"}
    c.submit(job("mine", "a", 1))
    c.cycle()
    victims = [(p.victim[:2], p.cause) for p in c.last.preemptions]
    assert victims == [("b-", PreemptionCause.PREEMPTED_FOR_RECLAIM)]
    c.now = 2
    c.cycle()
    assert "mine" in c.running()


def test_reclaim_takes_from_borrowers_of_the_own_cohort_first() -> None:
    c = Cluster.of(SHAPE, org_policy())
    full_cluster(c, "b", "a2")
    assert {"a2-0", "a2-1", "b-0", "b-1"} <= c.running()
    c.submit(job("mine", "a", 1))
    c.cycle()
    assert [p.victim[:3] for p in c.last.preemptions] == ["a2-"]
    c.now = 2
    c.submit(*(job(f"more-{i}", "a", 1) for i in range(3)))
    c.cycle()  # three more: the other of a2 first, then b's
    assert sorted(p.victim[:3] for p in c.last.preemptions) == ["a2-", "b-0", "b-1"]


def test_work_borrowed_inside_another_top_level_cohort_is_not_reclaimed() -> None:
    """lab's borrower borrows from lab's lender, not from org: org's teams cannot evict it."""
    c = Cluster.of(
        SHAPE,
        policy(
            team("a", 32, cohort=["org"]),
            team("c", 32, cohort=["lab"]),
            team("d", 0, borrow_gpus=32, cohort=["lab"]),
            idle_sharing=False,
        ),
    )
    c.submit(*(job(f"d-{i}", "d", 1) for i in range(4)), *(job(f"a-{i}", "a", 1) for i in range(4)))
    c.cycle()
    c.now = 1
    c.submit(job("more", "a", 1, gpus=8))
    c.cycle()
    assert not c.last.preemptions
    assert {"d-0", "d-1", "d-2", "d-3"} <= c.running()


def test_a_lender_whose_cohort_may_not_borrow_reclaims_even_with_idle_nodes() -> None:
    """org/x may take nothing from outside: when a wants its guarantee back, a2's borrowing
    cannot move elsewhere, so a2's work is reclaimed although nodes are free."""
    c = Cluster.of(
        SHAPE,
        policy(
            team("a", 16, cohort=["org", "x"]),
            team("a2", 0, borrow_gpus=64, cohort=["org", "x"]),
            team("b", 16, cohort=["org", "y"]),
            cohorts=[cohort(["org", "x"], borrow_gpus=0)],
        ),
    )
    c.submit(job("a2-0", "a2", 2))
    c.cycle()
    assert c.running() == {"a2-0"}
    c.now = 1
    c.submit(job("mine", "a", 1))
    c.cycle()
    assert [p.victim for p in c.last.preemptions] == ["a2-0"]


def test_a_cohorts_own_guarantee_is_reclaimed_by_its_teams_from_a_sibling_cohort() -> None:
    """org/x has 16 GPUs of its own, which b in org/y borrows while x's teams want nothing.
    When a2 (no guarantee of its own) wants them, b's work on them is reclaimed."""
    c = Cluster.of(
        SHAPE,
        policy(
            team("a2", 0, borrow_gpus=32, cohort=["org", "x"]),
            team("b", 0, borrow_gpus=64, cohort=["org", "y"]),
            team("c", 48, cohort=["lab"], sharing=SharingStrategy.DONT_LEND),
            cohorts=[cohort(["org", "x"], 16)],
            idle_sharing=False,
        ),
    )
    c.submit(*(job(f"c-{i}", "c", 1) for i in range(5)), *(job(f"b-{i}", "b", 1) for i in range(2)))
    c.cycle()
    assert {"b-0", "b-1"} <= c.running()
    c.now = 1
    c.submit(job("mine", "a2", 1))
    c.cycle()
    assert [(p.victim[:2], p.cause) for p in c.last.preemptions] == [
        ("b-", PreemptionCause.PREEMPTED_FOR_RECLAIM)
    ]
    c.now = 2
    c.cycle()
    assert "mine" in c.running()
