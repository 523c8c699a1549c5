"""Choosing victims, topology-aware: the smallest set of evictable jobs whose capacity, once
freed, lets the waiting gang fit *inside one domain* — never scattered GPUs it cannot use. If
no set of victims makes the gang fit, nobody is evicted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from topoq.core.holdings import release, total_demand
from topoq.core.ledger import CapacityLedger, confined
from topoq.core.placement import place_workload
from topoq.core.placement.request import plan_search
from topoq.core.quota import QuotaBook
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.governance import FlavorName
from topoq.domain.job import JobView
from topoq.domain.node import NodeName
from topoq.domain.workload import WorkloadSpec

MayEvict = Callable[[JobView, QuotaBook], bool]
"""Whether a candidate may still be evicted, given the books after the evictions so far."""


class TrialBudget:
    """How many trial placements the victim searches of one cycle may still make: a cap on a
    cycle's cost when many gangs search (KAI's scenario budget). A search cut short by it
    finds nothing, and its job searches again next cycle."""

    def __init__(self, trials: int) -> None:
        self.left = trials
        self.spent = False

    def take(self) -> bool:
        if self.left <= 0:
            self.spent = True
            return False
        self.left -= 1
        return True


@dataclass(frozen=True)
class VictimSearch:
    job: JobView
    flavor: FlavorName
    workload: WorkloadSpec
    """The job's workload restricted to the flavor."""


def select_victims(
    ledger: CapacityLedger,
    book: QuotaBook,
    search: VictimSearch,
    candidates: Sequence[JobView],
    may_evict: MayEvict,
    budget: TrialBudget | None = None,
) -> list[JobView] | None:
    """Fewest victims (then the least important) that make the job fit in one domain; the
    domains of the job's own search levels are tried lowest first. ``candidates`` come in
    eviction order (lowest priority, most recently started first). Each trial placement
    takes one from ``budget``; once it is spent the search finds nothing (``budget.spent``)."""
    if not candidates:
        return None
    budget = budget or TrialBudget(UNBOUNDED)
    tree = ledger.tree
    rank = {job.id: position for position, job in enumerate(candidates)}
    needed = tree.resource_vector(search.workload.total_requests)
    for level in _scope_levels(tree, search.workload):
        found = []
        for start, end in _domains(tree, level, candidates):
            if not _could_hold(ledger, candidates, needed, start, end):
                continue
            chosen = _victims_in(ledger, book, search, candidates, may_evict, (start, end), budget)
            if chosen:
                found.append(chosen)
        if budget.spent:
            return None
        if found:
            return min(found, key=lambda chosen: (len(chosen), sorted(rank[j.id] for j in chosen)))
    return None


WHOLE_CLUSTER = -1
UNBOUNDED = 1 << 62


def _scope_levels(tree: TopologyTree, workload: WorkloadSpec) -> list[int]:
    """The levels whose domains are tried, lowest first; the whole cluster last when the
    largest pod set may be split across top-level domains."""
    largest = max(workload.pod_sets, key=lambda pod_set: pod_set.count)
    plan = plan_search(tree.spec, largest)
    levels = list(plan.search_levels)
    if plan.split_at_top:
        levels.append(WHOLE_CLUSTER)
    return levels


def _domains(
    tree: TopologyTree, level: int, candidates: Sequence[JobView]
) -> list[tuple[int, int]]:
    """Node ranges of the domains (of ``level``) where some candidate holds capacity."""
    if level == WHOLE_CLUSTER:
        return [(0, len(tree.nodes))]
    index = tree.levels[level]
    touched: set[int] = set()
    for job in candidates:
        for node in _node_indexes(tree, job):
            touched.add(int(index.domain_of_node[node]))
    return [(int(index.node_start[d]), int(index.node_start[d + 1])) for d in sorted(touched)]


def _could_hold(
    ledger: CapacityLedger, candidates: Sequence[JobView], needed: IntArray, start: int, end: int
) -> bool:
    """Whether the domain's free capacity plus all the candidates hold there covers what the
    gang needs in total: a bound checked before any trial eviction (no set of victims frees
    more than all of them, and the gang must fit inside the domain)."""
    room = ledger.free[start:end].sum(axis=0)
    tree = ledger.tree
    for job in candidates:
        if job.allocation is None:
            continue
        for name, resources in job.allocation.resources_on_node.items():
            index = tree.node_index.get(NodeName(name))
            if index is not None and start <= index < end:
                room = room + tree.resource_vector(resources)
    return bool(np.all(room >= needed))


def _node_indexes(tree: TopologyTree, job: JobView) -> list[int]:
    if job.allocation is None:
        return []
    found = (tree.node_index.get(NodeName(name)) for name in job.allocation.resources_on_node)
    return [index for index in found if index is not None]


def _victims_in(
    ledger: CapacityLedger,
    book: QuotaBook,
    search: VictimSearch,
    candidates: Sequence[JobView],
    may_evict: MayEvict,
    domain: tuple[int, int],
    budget: TrialBudget,
) -> list[JobView] | None:
    start, end = domain
    local = [
        job for job in candidates if any(start <= n < end for n in _node_indexes(ledger.tree, job))
    ]
    trial_ledger, trial_book = ledger.scratch(), book.copy()
    chosen: list[JobView] = []
    for victim in local:
        if not may_evict(victim, trial_book):
            continue
        _evict(trial_ledger, trial_book, victim)
        chosen.append(victim)
        if not budget.take():
            return None
        if _fits(trial_ledger, trial_book, search, start, end):
            return _pruned(ledger, book, search, chosen, start, end)
    return None


def _pruned(
    ledger: CapacityLedger,
    book: QuotaBook,
    search: VictimSearch,
    chosen: list[JobView],
    start: int,
    end: int,
) -> list[JobView]:
    """Drop victims (the earliest chosen first) that the job turns out not to need."""
    kept = list(chosen)
    for victim in chosen[:-1]:
        without = [job for job in kept if job is not victim]
        trial_ledger, trial_book = ledger.scratch(), book.copy()
        for job in without:
            _evict(trial_ledger, trial_book, job)
        if _fits(trial_ledger, trial_book, search, start, end):
            kept = without
    return kept


def _evict(ledger: CapacityLedger, book: QuotaBook, victim: JobView) -> None:
    if victim.allocation is None:
        return
    release(ledger, victim.allocation.resources_on_node)
    for flavor, amount in victim.allocation.usage.items():
        book.release(victim.team, flavor, amount)


def _fits(
    ledger: CapacityLedger, book: QuotaBook, search: VictimSearch, start: int, end: int
) -> bool:
    if not book.check(search.job.team, search.flavor, total_demand(search.job)).verdict.admissible:
        return False
    scope = ledger if (start, end) == (0, len(ledger.tree.nodes)) else confined(ledger, start, end)
    return place_workload(scope, search.workload)[0].admitted
