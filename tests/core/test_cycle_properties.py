"""Invariants of the cycle over random teams, quotas and job streams (hypothesis)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.cycle import Snapshot, schedule
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.ordering import priority_of
from topoq.core.quota import QuotaBook
from topoq.domain.decisions import Diagnostic, PendingReason, PreemptionCause
from topoq.domain.governance import SharingStrategy
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.engine.outcomes import moved_by
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.testing.builders import BLOCK
from topoq.testing.governance import P5, Cluster, cohort, job, policy, team

SHAPE = [1, 2, 4]  # 64 GPUs
CLASSES = {"high": 100, "mid": 10, "low": 1}


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    shares = draw(st.sampled_from([(32, 32), (16, 48), (24, 24), (0, 64), (40, 8)]))
    teams = [
        team(
            name,
            gpus,
            borrow_gpus=draw(st.sampled_from([0, 8, 16, 64])),
            sharing=draw(st.sampled_from(list(SharingStrategy))),
        )
        for name, gpus in zip("ab", shares, strict=True)
    ]
    fair = draw(st.booleans())
    return Cluster.of(
        SHAPE, policy(*teams, classes=CLASSES, fair_share=fair, idle_sharing=draw(st.booleans()))
    )


@st.composite
def arrivals(draw: st.DrawFn, teams: str = "ab") -> list[list[tuple[str, int, int, str, bool]]]:
    """Per cycle: new jobs (team, pods, gpus, priority class, required block?)."""
    return [
        [
            (
                draw(st.sampled_from(teams)),
                draw(st.integers(1, 4)),
                draw(st.sampled_from([2, 4, 8])),
                draw(st.sampled_from(list(CLASSES))),
                draw(st.booleans()),
            )
            for _ in range(draw(st.integers(0, 4)))
        ]
        for _ in range(draw(st.integers(2, 6)))
    ]


def submit_wave(c: Cluster, wave: list[tuple[str, int, int, str, bool]], count: int) -> int:
    """Submits a wave of ``arrivals`` named from ``j{count}`` on; the next count."""
    for team_name, pods, gpus, cls, required in wave:
        extra = {"required": BLOCK} if required else {}
        c.submit(job(f"j{count}", team_name, pods, gpus, priority=cls, **extra))
        count += 1
    return count


def check_books(c: Cluster) -> None:
    running = [v for v in c.jobs.values() if v.phase is JobPhase.RUNNING]
    usage = usage_by_team(running)
    for spec in c.policy.teams:
        quota = spec.quota_for(P5)
        assert quota is not None
        used = usage.get(spec.name, {}).get(P5, Resources()).amount(NVIDIA_GPU)
        limit = quota.guarantee.amount(NVIDIA_GPU) + quota.borrow_limit.amount(NVIDIA_GPU)
        assert used <= limit, (spec.name, used, limit)
    on_node: dict[str, int] = defaultdict(int)
    for view in running:
        assert view.allocation is not None
        for node, resources in view.allocation.resources_on_node.items():
            on_node[node] += resources.amount(NVIDIA_GPU)
    assert all(gpus <= 8 for gpus in on_node.values()), on_node


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.randoms(use_true_random=False))
def test_books_balance_and_only_lower_priority_or_borrowed_work_is_preempted(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], rng: object
) -> None:
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        before = dict(c.jobs)
        book = QuotaBook(
            c.policy,
            capacity_by_flavor(c.tree, "node.kubernetes.io/instance-type"),
            usage_by_team(v for v in before.values() if v.phase.holds_capacity),
        )
        snapshot = Snapshot(c.now, c.tree, tuple(before.values()), c.policy)
        assert schedule(snapshot) == schedule(snapshot)
        result = c.cycle()
        for preempt in result.preemptions:
            victim, winner = before[preempt.victim], before[preempt.for_job]
            if preempt.cause is PreemptionCause.PREEMPTED_FOR_PRIORITY:
                assert victim.team == winner.team
                assert priority_of(c.policy, victim) < priority_of(c.policy, winner)
            else:
                assert victim.team != winner.team
                assert book.borrowed(victim.team, P5).amount(NVIDIA_GPU) > 0
        check_books(c)
        running = sorted(c.running())
        for job_id in running[: len(running) // 3]:  # some work finishes between cycles
            c.finish(job_id)
        c.now += 10


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.booleans())
def test_a_lender_gets_its_guarantee_back_within_one_cycle(
    lender_nodes: int, borrower_jobs: int, required: bool
) -> None:
    c = Cluster.of(SHAPE, policy(team("lender", 32), team("borrower", 0, borrow_gpus=64)))
    c.submit(*(job(f"b{i}", "borrower", 1) for i in range(borrower_jobs)))
    c.cycle()
    c.now = 1
    extra = {"required": BLOCK} if required else {}
    c.submit(job("mine", "lender", lender_nodes, **extra))
    block_of = {name: node.labels[BLOCK] for name, node in ((n.name, n) for n in c.tree.nodes)}
    before = dict(c.jobs)
    c.cycle()
    victims = [p.victim for p in c.last.preemptions]
    c.now = 2
    c.cycle()
    assert c.phase("mine") is JobPhase.RUNNING
    view = c.jobs[JobId("mine")]
    assert view.allocation is not None
    assert not view.allocation.borrowed
    if required and victims:  # the victims freed room in the block the gang then uses
        freed = {block_of[n] for v in victims for n in before[v].allocation.nodes}  # type: ignore[union-attr]
        used = {block_of[n] for n in view.allocation.nodes}
        assert used <= freed


def gpus_on_nodes(jobs: Iterable[JobView]) -> dict[str, int]:
    """GPUs booked per node by every job that holds capacity, victims still stopping too."""
    on_node: dict[str, int] = defaultdict(int)
    for view in jobs:
        if view.phase.holds_capacity and view.allocation is not None:
            for node, resources in view.allocation.resources_on_node.items():
                on_node[node] += resources.amount(NVIDIA_GPU)
    return on_node


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_no_gpu_is_booked_twice_while_victims_stop(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    """Victims stop after any number of cycles (PREEMPTING until their STOPPED): meanwhile no
    node carries more GPUs than it has, a victim is never chosen again, its preemptor is not
    admitted and the other running work stays within its team's quota."""
    jobs, count = dict(c.jobs), 0
    for wave in [*waves, [], [], []]:
        for team_name, pods, gpus, cls, required in wave:
            extra = {"required": BLOCK} if required else {}
            view = job(f"j{count}", team_name, pods, gpus, priority=cls, **extra)
            jobs[view.id] = replace(view, spec=replace(view.spec, submitted_at=c.now))
            count += 1
        stopping = {v.id for v in jobs.values() if v.phase is JobPhase.PREEMPTING}
        waiting = {jobs[v].preempted_for for v in stopping} - {None}
        result = schedule(Snapshot(c.now, c.tree, tuple(jobs.values()), c.policy))
        assert not {p.victim for p in result.preemptions} & stopping
        assert not {a.job for a in result.admissions} & waiting
        for diagnostic in result.diagnostics:
            if diagnostic.job in waiting:
                assert diagnostic.reason is PendingReason.WAITING_FOR_VICTIMS
        jobs = apply_cycle(jobs, result, now=c.now, start_at_once=True)
        assert all(gpus <= 8 for gpus in gpus_on_nodes(jobs.values()).values())
        check_books(replace(c, jobs=jobs))
        c.now += 10
        for victim in sorted(v.id for v in jobs.values() if v.phase is JobPhase.PREEMPTING):
            if data.draw(st.booleans(), label=f"{victim} stops"):
                event = ExecutorEvent(ExecutorEventKind.STOPPED, c.now, job=victim)
                moved = moved_by(jobs[victim], event)
                assert moved is not None and moved.phase is JobPhase.PENDING
                assert moved.allocation is None
                jobs[victim] = moved
        running = sorted(j for j, v in jobs.items() if v.phase is JobPhase.RUNNING)
        for job_id in running[: len(running) // 3]:
            jobs[job_id] = advance(jobs[job_id], JobPhase.SUCCEEDED, now=c.now, cause="exited")


@st.composite
def cohort_clusters(draw: st.DrawFn) -> Cluster:
    """Teams a and b in org/x, c in org/y, d at the top; random cohort limits and guarantees."""
    limits = st.none() | st.sampled_from([0, 8, 16, 32])
    teams = [
        team(
            name,
            draw(st.sampled_from([0, 8, 16])),
            borrow_gpus=draw(st.sampled_from([0, 16, 64])),
            cohort=path,
            sharing=draw(st.sampled_from(list(SharingStrategy))),
        )
        for name, path in (("a", ["org", "x"]), ("b", ["org", "x"]), ("c", ["org", "y"]), ("d", []))
    ]
    cohorts = [
        cohort(
            path, draw(st.sampled_from([0, 8])), borrow_gpus=draw(limits), lend_gpus=draw(limits)
        )
        for path in (["org"], ["org", "x"], ["org", "y"])
    ]
    chosen = policy(
        *teams,
        classes=CLASSES,
        fair_share=draw(st.booleans()),
        idle_sharing=draw(st.booleans()),
        cohorts=cohorts,
    )
    return Cluster.of(SHAPE, chosen)


@settings(max_examples=40, deadline=None)
@given(cohort_clusters(), arrivals(teams="abcd"))
def test_cohort_limits_are_never_exceeded(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]]
) -> None:
    count = 0
    for wave in waves:
        for team_name, pods, gpus, cls, required in wave:
            extra = {"required": BLOCK} if required else {}
            c.submit(job(f"j{count}", team_name, pods, gpus, priority=cls, **extra))
            count += 1
        c.cycle()
        holding = [v for v in c.jobs.values() if v.phase.holds_capacity]
        book = QuotaBook(
            c.policy,
            capacity_by_flavor(c.tree, "node.kubernetes.io/instance-type"),
            usage_by_team(holding),
        )
        flow = book.flow(P5)
        assert not any(flow.over_limit.values()), (flow.over_limit, flow.need)
        for spec in c.policy.cohorts:
            quota = spec.quota_for(P5)
            assert quota is not None
            if NVIDIA_GPU in quota.borrow_limited:
                taken = flow.need[spec.path].amount(NVIDIA_GPU)
                assert taken <= quota.borrow_limit.amount(NVIDIA_GPU), (spec.path, taken)
        running = sorted(c.running())
        for job_id in running[: len(running) // 3]:
            c.finish(job_id)
        c.now += 10


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.booleans())
def test_a_cohorts_teams_get_its_own_guarantee_back_within_one_cycle(
    nodes: int, borrower_jobs: int, required: bool
) -> None:
    chosen = policy(
        team("lender", 0, borrow_gpus=64, cohort=["org", "x"]),
        team("borrower", 0, borrow_gpus=64, cohort=["org", "y"]),
        cohorts=[cohort(["org", "x"], 32)],
    )
    c = Cluster.of(SHAPE, chosen)
    c.submit(*(job(f"b{i}", "borrower", 1) for i in range(borrower_jobs)))
    c.cycle()
    c.now = 1
    extra = {"required": BLOCK} if required else {}
    c.submit(job("mine", "lender", nodes, **extra))
    c.cycle()
    c.now = 2
    c.cycle()
    assert c.phase("mine") is JobPhase.RUNNING


@settings(max_examples=40, deadline=None)
@given(clusters(), arrivals(), st.randoms(use_true_random=False))
def test_what_a_cycle_decides_does_not_depend_on_the_order_of_the_snapshots_jobs(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], rng: Random
) -> None:
    """A shell may hand the cycle its jobs in any order (the simulator's ``PhaseIndex`` keeps
    them in the order it stored them): the same admissions, preemptions, requeues and waits."""
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        jobs = list(c.jobs.values())
        shuffled = list(jobs)
        rng.shuffle(shuffled)
        given = schedule(Snapshot(c.now, c.tree, tuple(jobs), c.policy))
        other = schedule(Snapshot(c.now, c.tree, tuple(shuffled), c.policy))
        assert other.admissions == given.admissions
        assert other.preemptions == given.preemptions
        assert set(other.requeues) == set(given.requeues)
        assert sorted(other.diagnostics, key=_job_of) == sorted(given.diagnostics, key=_job_of)
        c.cycle()
        running = sorted(c.running())
        for job_id in running[: len(running) // 2]:
            c.finish(job_id)
        c.now += 10


def _job_of(diagnostic: Diagnostic) -> str:
    return diagnostic.job
