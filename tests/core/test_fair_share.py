"""Fair share with usage history (``core.fair_share``): the decay, the position, and how the
cycle's order and its fair-share victims use it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES, check_books
from topoq.core.cycle import Snapshot, schedule
from topoq.core.fair_share import (
    TeamUsage,
    borrowed_fraction,
    decayed,
    fair_share_position,
    held_fractions,
    recheck_due,
    usage_at,
)
from topoq.core.holdings import capacity_by_flavor, total_demand, usage_by_team
from topoq.core.quota import QuotaBook, dominant_share
from topoq.domain.decisions import PreemptionCause
from topoq.domain.governance import ClusterPolicy, IdleAllocation, TeamName
from topoq.domain.job import JobPhase
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5, Cluster, job, policy, team

HOUR_S = 3600.0
A, B, C = TeamName("a"), TeamName("b"), TeamName("c")


def fair_policy(*weights: int) -> ClusterPolicy:
    """Teams a, b, c, … with no guarantee, each may borrow the whole 8-node cluster."""
    names = "abc"[: len(weights)]
    teams = [team(n, 0, borrow_gpus=64, weight=w) for n, w in zip(names, weights, strict=True)]
    return policy(*teams, fair_share=True, fifo=True)


def book_with(held: dict[TeamName, int], *weights: int) -> QuotaBook:
    """An 8-node (64-GPU) book where each team holds ``held[team]`` GPUs."""
    capacity = {P5: Resources({NVIDIA_GPU: 64})}
    usage = {name: {P5: Resources({NVIDIA_GPU: gpus})} for name, gpus in held.items()}
    return QuotaBook(fair_policy(*weights), capacity, usage)


# --- the decay ---------------------------------------------------------------------------


def test_usage_halves_in_one_half_life_when_nothing_is_held() -> None:
    assert decayed(0.8, 0.0, HOUR_S, HOUR_S) == pytest.approx(0.4)
    assert decayed(0.8, 0.0, 2 * HOUR_S, HOUR_S) == pytest.approx(0.2)


def test_usage_of_a_team_that_keeps_holding_a_fraction_tends_to_that_fraction() -> None:
    assert decayed(0.0, 0.5, HOUR_S, HOUR_S) == pytest.approx(0.25)
    assert decayed(0.0, 0.5, 40 * HOUR_S, HOUR_S) == pytest.approx(0.5)
    assert decayed(1.0, 0.5, 40 * HOUR_S, HOUR_S) == pytest.approx(0.5)


@given(
    share=st.floats(0, 1),
    held=st.floats(0, 1),
    first_s=st.floats(0, 10 * HOUR_S),
    second_s=st.floats(0, 10 * HOUR_S),
)
def test_accounting_an_interval_in_two_steps_gives_what_one_step_gives(
    share: float, held: float, first_s: float, second_s: float
) -> None:
    twice = decayed(decayed(share, held, first_s, HOUR_S), held, second_s, HOUR_S)
    once = decayed(share, held, first_s + second_s, HOUR_S)
    assert twice == pytest.approx(once, abs=1e-9)
    assert min(share, held) - 1e-9 <= once <= max(share, held) + 1e-9


def test_a_clock_set_back_changes_no_usage() -> None:
    assert decayed(0.3, 1.0, -60.0, HOUR_S) == 0.3
    brought = usage_at({A: TeamUsage(0.3, 100.0)}, {A: 1.0}, since_s=100, now_s=40, half_life_s=60)
    assert brought == {A: TeamUsage(0.3, 100.0)}


def test_usage_at_brings_every_team_forward_from_its_own_time() -> None:
    usage = {A: TeamUsage(0.8, 0.0), B: TeamUsage(0.4, HOUR_S)}
    brought = usage_at(usage, {C: 1.0}, since_s=HOUR_S, now_s=2 * HOUR_S, half_life_s=HOUR_S)
    assert brought[A] == TeamUsage(pytest.approx(0.2), 2 * HOUR_S)
    assert brought[B] == TeamUsage(pytest.approx(0.2), 2 * HOUR_S)
    assert brought[C] == TeamUsage(pytest.approx(0.5), 2 * HOUR_S)  # held since ``since_s``


def test_a_half_life_of_zero_keeps_no_usage() -> None:
    usage = {A: TeamUsage(0.8, 0.0)}
    assert usage_at(usage, {A: 1.0}, since_s=0, now_s=HOUR_S, half_life_s=0) == {}


# --- the position ------------------------------------------------------------------------


def test_without_usage_the_position_is_the_weighted_share_now() -> None:
    book = book_with({A: 16, B: 32}, 1, 2)
    assert fair_share_position(book, A, {}) == dominant_share(book, A) == 0.25
    assert fair_share_position(book, B, {}) == dominant_share(book, B) == 0.25


def test_usage_adds_to_the_share_now_divided_by_the_weight() -> None:
    book = book_with({A: 16, B: 32}, 1, 2)
    usage = {A: 0.5, B: 0.5}
    assert fair_share_position(book, A, usage) == pytest.approx(0.25 + 0.5)
    assert fair_share_position(book, B, usage) == pytest.approx(0.25 + 0.25)
    assert fair_share_position(book, C, usage) == 0.0  # unknown to the books: no share


def test_with_a_half_life_of_zero_usage_is_ignored_whatever_the_snapshot_says() -> None:
    book = book_with({A: 16}, 1, 1)
    off = QuotaBook(replace(book.policy, fair_share_usage_half_life_s=0), book.capacity, book.usage)
    assert fair_share_position(off, A, {A: 0.5}) == 0.25


def test_a_team_of_weight_zero_with_usage_stands_last() -> None:
    book = book_with({}, 0, 1)
    assert fair_share_position(book, A, {}) == 0.0
    assert math.isinf(fair_share_position(book, A, {A: 0.01}))


def test_only_capacity_held_above_the_guarantee_counts() -> None:
    guaranteed = policy(team("a", 16, borrow_gpus=48), team("b", 0, borrow_gpus=64))
    capacity = {P5: Resources({NVIDIA_GPU: 64})}
    usage = {A: {P5: Resources({NVIDIA_GPU: 32})}, B: {P5: Resources({NVIDIA_GPU: 16})}}
    book = QuotaBook(guaranteed, capacity, usage)
    assert borrowed_fraction(book, A) == 0.25  # 32 held, 16 of them guaranteed
    assert borrowed_fraction(book, B) == 0.25


def test_held_fractions_count_only_the_jobs_that_hold_capacity() -> None:
    c = Cluster.of([8], fair_policy(1, 1), job("a1", "a", pods=2), job("b1", "b"))
    c.cycle()
    c.submit(job("b2", "b"))
    assert held_fractions(c.policy, c.tree, c.jobs.values()) == {A: 0.25, B: 0.125}


def test_a_recheck_is_due_after_a_thousandth_of_the_half_life_only_with_history() -> None:
    day = ClusterPolicy(idle_allocation=IdleAllocation.FAIR_SHARE)
    assert not recheck_due(day, 0.0, 86.0)
    assert recheck_due(day, 0.0, 86.4)
    assert not recheck_due(ClusterPolicy(), 0.0, 10 * HOUR_S)  # first-come: no history
    off = ClusterPolicy(idle_allocation=IdleAllocation.FAIR_SHARE, fair_share_usage_half_life_s=0)
    assert not recheck_due(off, 0.0, 10 * HOUR_S)


# --- the cycle ---------------------------------------------------------------------------


def test_the_team_with_less_usage_goes_first_for_idle_capacity() -> None:
    c = Cluster.of([2], fair_policy(1, 1))
    c.submit(job("a1", "a"), job("a2", "a"))
    c.now = 1.0
    c.submit(job("b1", "b"), job("b2", "b"))
    c.fair_share_usage = {A: 0.6}  # above b's 0.5 once b runs one of the two nodes
    c.cycle()
    assert c.running() == {"b1", "b2"}


def test_with_no_usage_the_order_is_the_instantaneous_fair_share() -> None:
    c = Cluster.of([2], fair_policy(1, 1))
    c.submit(job("a1", "a"), job("a2", "a"))
    c.now = 1.0
    c.submit(job("b1", "b"), job("b2", "b"))
    c.cycle()
    assert c.running() == {"a1", "b1"}


def test_usage_makes_borrowed_work_of_the_team_that_used_most_a_fair_share_victim() -> None:
    c = Cluster.of([6], fair_policy(1, 1, 1))
    c.submit(*(job(f"{n}{i}", n) for n in "abc" for i in (1, 2)))
    c.cycle()
    c.submit(job("b3", "b"))
    assert c.cycle().preemptions == ()  # shares now are equal: nobody is evicted
    c.fair_share_usage = {A: 0.1, C: 0.7}
    result = c.cycle()
    assert [p.victim[0] for p in result.preemptions] == ["c"]
    assert result.preemptions[0].cause.value == "PREEMPTED_FOR_FAIR_SHARE"


def test_usage_does_not_let_a_team_preempt_one_that_stays_below_it() -> None:
    c = Cluster.of([4], fair_policy(1, 1))
    c.submit(job("a1", "a"), job("a2", "a"), job("b1", "b"), job("b2", "b"))
    c.cycle()
    c.submit(job("a3", "a"))
    c.fair_share_usage = {A: 0.7, B: 0.1}  # a used more: it may not take b's work
    assert c.cycle().preemptions == ()
    assert c.phase("a3") is JobPhase.PENDING


@st.composite
def borrowing_clusters(draw: st.DrawFn) -> Cluster:
    """Two teams that borrow most of the 64 GPUs under fair share, with random weights."""
    shares = draw(st.sampled_from([(0, 0), (16, 0), (8, 8), (0, 24)]))
    weights = draw(st.sampled_from([(1, 1), (1, 2), (3, 1), (0, 1)]))
    teams = [
        team(name, gpus, borrow_gpus=64, weight=weight)
        for name, gpus, weight in zip("ab", shares, weights, strict=True)
    ]
    return Cluster.of([1, 2, 4], policy(*teams, classes=CLASSES, fair_share=True, fifo=True))


def check_fair_share_victims(
    c: Cluster, usage: dict[TeamName, float], arrivals: list[tuple[str, int, int]]
) -> None:
    """Submit each arrival (team, pods, GPUs per pod) and run a cycle: a fair-share victim's
    team, without the victim, stands at least as high as the preemptor's team with its job;
    the books balance and the same snapshot gives the same result."""
    c.fair_share_usage = usage
    for count, (team_name, pods, gpus) in enumerate(arrivals):
        c.submit(job(f"j{count}", team_name, pods, gpus))
        before = dict(c.jobs)
        holders = [v for v in before.values() if v.phase.holds_capacity]
        capacity = capacity_by_flavor(c.tree, INSTANCE_TYPE_LABEL)
        book = QuotaBook(c.policy, capacity, usage_by_team(holders))
        snapshot = Snapshot(c.now, c.tree, tuple(before.values()), c.policy, fair_share_usage=usage)
        assert schedule(snapshot) == schedule(snapshot)
        for preempt in c.cycle().preemptions:
            if preempt.cause is not PreemptionCause.PREEMPTED_FOR_FAIR_SHARE:
                continue  # reclaim, for a team with a guarantee
            event("a fair-share preemption")
            victim, winner = before[preempt.victim], before[preempt.for_job]
            assert victim.allocation is not None and victim.team != winner.team
            without = book.copy()
            for flavor, amount in victim.allocation.usage.items():
                without.release(victim.team, flavor, amount)
            with_job = book.copy()
            with_job.charge(winner.team, P5, total_demand(winner))
            mine = fair_share_position(with_job, winner.team, usage)
            theirs = fair_share_position(without, victim.team, usage)
            assert theirs >= mine
        check_books(c)
        c.now += 10


@settings(max_examples=60, deadline=None)
@given(
    borrowing_clusters(),
    st.floats(0, 1),
    st.floats(0, 1),
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(1, 2), st.sampled_from([4, 8])), max_size=12
    ),
)
def test_with_any_usage_fair_share_victims_stand_higher_and_the_books_balance(
    c: Cluster, usage_a: float, usage_b: float, arrivals: list[tuple[str, int, int]]
) -> None:
    """The cluster starts full of a's work; then a and b submit more, whatever their usage."""
    check_fair_share_victims(c, {A: usage_a, B: usage_b}, [("a", 1, 8)] * 8 + arrivals)
