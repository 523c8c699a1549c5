"""A victim search skips a domain whose victims could not rank before the best found so far
at its level (``preemption._could_beat``): it must choose exactly what trying every domain
chooses, and the bound may only ever save trials."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topoq.core.holdings import capacity_by_flavor, prepared_ledger, usage_by_team
from topoq.core.ordering import eviction_order
from topoq.core.preemption import (
    UNBOUNDED,
    TrialBudget,
    VictimSearch,
    _domains_that_could_hold,
    _scope_levels,
    _victims_in,
    select_victims,
)
from topoq.core.quota import QuotaBook
from topoq.domain.job import JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.testing.governance import P5, Cluster, job, policy, team

CLASSES = {"inference": 100, "experiment": 10}

SHAPE = [2, 2, 4]  # 16 nodes: 2 spines, 4 blocks, 4 nodes a block
LEVELS = ("spine", "block")


def _tried_everywhere(ledger, book, search, candidates, budget):  # type: ignore[no-untyped-def]
    """The search as it was before the bound: every domain that could hold the gang is tried
    and the best of them kept."""
    tree = ledger.tree
    needed = tree.resource_vector(search.workload.total_requests)
    held = budget.entries.of(tree, candidates)
    rank = {job.id: position for position, job in enumerate(candidates)}
    for level in _scope_levels(tree, search.workload):
        found = []
        for domain in _domains_that_could_hold(ledger, level, candidates, held, needed):
            chosen = _victims_in(
                ledger, book, search, domain.candidates, lambda *_: True, domain.nodes, budget
            )
            if chosen:
                found.append(chosen)
        if found:
            return min(found, key=lambda chosen: (len(chosen), sorted(rank[j.id] for j in chosen)))
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    running=st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4, 8])), min_size=1, max_size=14
    ),
    pods=st.integers(1, 8),
    gpus=st.sampled_from([2, 4, 8]),
    where=st.sampled_from(
        [None, *[(kind, level) for kind in ("required", "preferred") for level in LEVELS]]
    ),
)
def test_the_bound_chooses_what_trying_every_domain_chooses(
    running: list[tuple[int, int]], pods: int, gpus: int, where: tuple[str, str] | None
) -> None:
    c = Cluster.of(SHAPE, policy(team("a", 128), classes=CLASSES))
    c.submit(*(job(f"r{i}", "a", n, g, priority="experiment") for i, (n, g) in enumerate(running)))
    c.cycle()
    holders = [j for j in c.jobs.values() if j.phase is JobPhase.RUNNING]
    topology = {where[0]: where[1]} if where else {}
    wanted: JobView = job("urgent", "a", pods, gpus, priority="inference", **topology)
    ledger = prepared_ledger(c.tree, holders, None).ledger()
    book = QuotaBook(
        c.policy, capacity_by_flavor(c.tree, INSTANCE_TYPE_LABEL), usage_by_team(holders)
    )
    search = VictimSearch(wanted, P5, wanted.spec.workload)
    candidates = eviction_order(c.policy, holders)

    bounded, everywhere = TrialBudget(UNBOUNDED), TrialBudget(UNBOUNDED)
    chosen = select_victims(ledger, book, search, candidates, lambda *_: True, bounded)
    expected = _tried_everywhere(ledger, book, search, candidates, everywhere)

    assert [j.id for j in chosen or []] == [j.id for j in expected or []]
    assert bounded.left >= everywhere.left  # never more trials
    assert (ledger.free == prepared_ledger(c.tree, holders, None).ledger().free).all()
