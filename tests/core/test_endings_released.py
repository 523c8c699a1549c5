"""What running jobs give back once they end, summed (``backfill.Endings``), against giving
it back job by job — the books' figures and verdicts and a ledger's free capacity the same
for every count — and the shortcut the expected starts take for a team whose quota check
reads its own usage alone (``QuotaBook.on_own_usage``): on random policies, whatever other
teams use, such a team's verdicts stay the same."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_quota_reference import CAPACITY, FLAVOR, amounts, policies
from topoq.core.backfill import Endings
from topoq.core.holdings import release
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    FlavorQuota,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.job import Allocation, JobPhase, JobView
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.testing.builders import cluster, tree_and_ledger
from topoq.testing.governance import job

SHAPE = [2, 2, 4]
NODES = [f"n{index:02d}" for index in range(16)]


def running(name: str, team: TeamName, usage: Resources, nodes: list[tuple[int, int]]) -> JobView:
    """A running job of ``team`` holding ``usage`` of the flavor and GPUs on nodes."""
    view = job(name, team)
    on_nodes = {NODES[node]: Resources({"nvidia.com/gpu": gpus}) for node, gpus in nodes}
    allocation = Allocation(PlacementResult(name, ()), on_nodes, {FLAVOR: usage})
    return JobView(view.spec, phase=JobPhase.RUNNING, allocation=allocation, started_at=0.0)


holdings = st.lists(
    st.tuples(
        st.integers(0, 4),
        amounts,
        st.lists(st.tuples(st.integers(0, 15), st.integers(1, 2)), max_size=3),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(policies(), holdings, amounts, st.data())
def test_summed_releases_leave_the_books_and_the_ledger_as_job_by_job(
    rules: ClusterPolicy,
    held: list[tuple[int, Resources, list[tuple[int, int]]]],
    demand: Resources,
    data: st.DataObject,
) -> None:
    names = [spec.name for spec in rules.teams]
    book = QuotaBook(rules, CAPACITY)
    tree, ledger = tree_and_ledger(*cluster(SHAPE))
    jobs = []
    for index, (who, usage, nodes) in enumerate(held):
        one = running(f"j{index}", names[who % len(names)], usage, nodes)
        book.charge(one.team, FLAVOR, usage)
        assert one.allocation is not None
        for name, resources in one.allocation.resources_on_node.items():
            ledger.charge_node(tree.node_index[name], tree.resource_vector(resources))
        jobs.append(one)
    ending = Endings((float(index), one) for index, one in enumerate(jobs))
    for count in data.draw(st.lists(st.integers(0, len(jobs)), min_size=1, max_size=4)):
        one_by_one, summed = book.copy(), book.copy()
        by_job, by_sum = ledger.scratch(), ledger.scratch()
        for _, one in ending[:count]:
            assert one.allocation is not None
            one_by_one.release(one.team, FLAVOR, one.allocation.usage[FLAVOR])
            release(by_job, one.allocation.resources_on_node)
        ending.release_quota(summed, count)
        ending.release_capacity(by_sum, count)
        assert summed.usage == one_by_one.usage
        assert summed.flow(FLAVOR) == one_by_one.flow(FLAVOR)
        assert np.array_equal(by_sum.free, by_job.free)
        assert all(
            np.array_equal(a, b)
            for a, b in zip(by_sum.domain_free, by_job.domain_free, strict=True)
        )
        for name in names:
            assert (
                summed.check(name, FLAVOR, demand).verdict
                is one_by_one.check(name, FLAVOR, demand).verdict
            )


@settings(max_examples=300, deadline=None)
@given(
    policies(),
    st.integers(0, 4),
    st.lists(st.tuples(st.integers(0, 4), amounts), max_size=6),
    amounts,
)
def test_a_team_on_its_own_usage_gets_the_same_verdict_whatever_the_others_use(
    drawn: ClusterPolicy, chosen: int, others: list[tuple[int, Resources]], demand: Resources
) -> None:
    index = chosen % len(drawn.teams)  # in no cohort, active: on its own usage if it never borrows
    teams = list(drawn.teams)
    teams[index] = replace(teams[index], cohort=(), active=True)
    rules = replace(drawn, teams=tuple(teams))
    spec, names = teams[index], [team.name for team in teams]
    book = QuotaBook(rules, CAPACITY)
    assert book.on_own_usage(spec.name) is not spec.sharing.borrows
    if not book.on_own_usage(spec.name):
        return
    alone = book.check(spec.name, FLAVOR, demand).verdict
    for who, amount in others:
        other = names[who % len(names)]
        if other != spec.name:
            book.charge(other, FlavorName(FLAVOR), amount)
    assert book.check(spec.name, FLAVOR, demand).verdict is alone


def test_a_team_that_borrows_is_not_on_its_own_usage_lenders_decide() -> None:
    eight = Resources({"nvidia.com/gpu": 8})
    borrower = TeamSpec(
        TeamName("a"), (FlavorQuota(FLAVOR, eight, eight),), SharingStrategy.LEND_AND_BORROW
    )
    lender = TeamSpec(TeamName("b"), (FlavorQuota(FLAVOR, eight, eight),), SharingStrategy.LEND)
    book = QuotaBook(ClusterPolicy(teams=(borrower, lender), idle_resource_sharing=False), CAPACITY)
    sixteen = Resources({"nvidia.com/gpu": 16})
    assert not book.on_own_usage(borrower.name) and book.on_own_usage(lender.name)
    assert book.check(borrower.name, FLAVOR, sixteen).verdict is QuotaVerdict.BORROWING
    book.charge(lender.name, FLAVOR, eight)  # the lender uses its guarantee: nothing to lend
    assert book.check(borrower.name, FLAVOR, sixteen).verdict is QuotaVerdict.NO_LENDER
