"""``queue_order``: the waiting jobs in the order the next cycle would give them their turns,
on the books as they stand — within guarantee first, then priority, fair-share position and
submission — without the jobs held by a user or waiting on another job."""

from __future__ import annotations

from dataclasses import replace

from topoq.core.cycle import queue_order
from topoq.domain.governance import PriorityClass, QueueOrder
from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase
from topoq.testing.governance import Cluster, job, policy, team

CLASSES = {"high": 100, "low": 1}


def full_cluster(*, fair_share: bool = False) -> Cluster:
    """64 GPUs: team a (guarantee 40) runs 32, team b (guarantee 24) runs 32, 8 borrowed."""
    rules = policy(
        team("a", 40, borrow_gpus=32, weight=1),
        team("b", 24, borrow_gpus=32, weight=1),
        classes=CLASSES,
        fair_share=fair_share,
    )
    cluster = Cluster.of([2, 4], rules)
    cluster.submit(job("a-run", "a", 4), job("b-run", "b", 4))
    cluster.cycle()
    assert cluster.running() == {"a-run", "b-run"}
    return cluster


def order(cluster: Cluster) -> list[str]:
    return [str(job_id) for job_id in queue_order(cluster.snapshot())]


def test_inside_a_guarantee_first_then_priority_then_submission_each_team_in_its_order() -> None:
    cluster = full_cluster()
    for at, pending in enumerate(
        [
            job("b-low", "b", 1, priority="low"),
            job("a-high", "a", 2, priority="high"),  # a: 32 + 16 > 40, past its guarantee
            job("b-high", "b", 1, priority="high"),
            job("a-fits", "a", 1, priority="low"),  # a: 32 + 8 = 40, inside its guarantee
            job("a-low", "a", 2, priority="low"),
        ]
    ):
        cluster.now = float(at + 1)
        cluster.submit(pending)
    # a team's own queue keeps priority, then submission: a-high heads a's; behind it,
    # a-fits stands inside a's guarantee and so goes before b's high-priority job
    assert order(cluster) == ["a-high", "a-fits", "b-high", "b-low", "a-low"]


def test_under_fair_share_the_team_that_borrows_less_goes_first_among_equals() -> None:
    cluster = full_cluster(fair_share=True)  # b borrows 8 GPUs now, a none
    cluster.now = 1.0
    cluster.submit(job("b-first", "b", 2, priority="low"))
    cluster.now = 2.0
    cluster.submit(job("a-later", "a", 2, priority="low"))  # past a's guarantee too
    assert order(cluster) == ["a-later", "b-first"]
    cluster.fair_share_usage = {}
    cluster.policy = replace(cluster.policy, idle_allocation=full_cluster().policy.idle_allocation)
    assert order(cluster) == ["b-first", "a-later"]  # first come: submission decides


def test_held_jobs_and_jobs_waiting_on_another_job_are_not_in_line() -> None:
    cluster = full_cluster()
    cluster.submit(job("first", "a", 2), job("blocked", "a", 1), job("held", "b", 1))
    after = Dependency(DependencyKind.AFTER_OK, JobId("first"))
    blocked = cluster.jobs[JobId("blocked")]
    cluster.jobs[JobId("blocked")] = replace(
        blocked, spec=replace(blocked.spec, dependencies=(after,))
    )
    cluster.jobs[JobId("held")] = replace(cluster.jobs[JobId("held")], held=True)
    assert order(cluster) == ["first"]
    assert cluster.jobs[JobId("first")].phase is JobPhase.PENDING


def test_shortest_first_orders_a_priority_by_time_limit_the_unlimited_last() -> None:
    cluster = full_cluster()
    limits = {"a-hour": 3600.0, "a-none": None, "b-minute": 60.0, "a-minute": 60.0}
    for at, (name, limit) in enumerate(limits.items()):
        cluster.now = float(at + 1)
        cluster.submit(job(name, name[0], 2, priority="low", time_limit=limit))
    cluster.submit(job("a-high-day", "a", 2, priority="high", time_limit=86400.0))
    assert order(cluster) == ["a-high-day", "a-hour", "a-none", "b-minute", "a-minute"]

    cluster.policy = replace(cluster.policy, queue_order=QueueOrder.SHORTEST_FIRST)
    # priority first still; within it the shortest limit, then submission; no limit last
    assert order(cluster) == ["a-high-day", "b-minute", "a-minute", "a-hour", "a-none"]


def test_shortest_first_takes_a_class_time_limit_for_jobs_that_set_none() -> None:
    cluster = full_cluster()
    classes = (PriorityClass("high", 100), PriorityClass("low", 1, time_limit_s=600.0))
    cluster.policy = replace(
        cluster.policy, priority_classes=classes, queue_order=QueueOrder.SHORTEST_FIRST
    )
    cluster.now = 1.0
    cluster.submit(job("own-hour", "b", 1, priority="low", time_limit=3600.0))
    cluster.now = 2.0
    cluster.submit(job("class-ten-minutes", "b", 1, priority="low"))
    assert order(cluster) == ["class-ten-minutes", "own-hour"]
