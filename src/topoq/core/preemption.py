"""Choosing victims, topology-aware: the smallest set of evictable jobs whose capacity, once
freed, lets the waiting gang fit *inside one domain* — never scattered GPUs it cannot use. If
no set of victims makes the gang fit, nobody is evicted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from topoq.core.holdings import total_demand
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
        self.held: dict[int, _Held] = {}
        """Each candidate's nodes and what it holds on each, as arrays (by the ``id`` of its
        allocation, which is kept beside them): worked out once for all the cycle's searches."""

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
    takes one from ``budget``; once it is spent the search finds nothing (``budget.spent``),
    and a search that starts with it spent tries nothing."""
    budget = budget or TrialBudget(UNBOUNDED)
    if not candidates or budget.spent:
        return None
    tree = ledger.tree
    rank = {job.id: position for position, job in enumerate(candidates)}
    needed = tree.resource_vector(search.workload.total_requests)
    held = [_held(tree, job, budget.held) for job in candidates]
    for level in _scope_levels(tree, search.workload):
        found = []
        for (start, end), local in _domains_that_could_hold(
            ledger, level, candidates, held, needed
        ):
            chosen = _victims_in(ledger, book, search, local, may_evict, (start, end), budget)
            if chosen:
                found.append(chosen)
        if budget.spent:
            return None
        if found:
            return min(found, key=lambda chosen: (len(chosen), sorted(rank[j.id] for j in chosen)))
    return None


_Held = tuple[object, IntArray, IntArray]
"""An allocation (kept, so that its ``id`` stays its own), its node indexes, and what it holds
on each (one row per node)."""


def _held(tree: TopologyTree, job: JobView, known: dict[int, _Held]) -> _Held:
    allocation = job.allocation
    found = known.get(id(allocation))
    if found is not None and found[0] is allocation:
        return found
    indexes: list[int] = []
    vectors: list[IntArray] = []
    if allocation is not None:
        for name, resources in allocation.resources_on_node.items():
            index = tree.node_index.get(NodeName(name))
            if index is not None:
                indexes.append(index)
                vectors.append(tree.resource_vector(resources))
    width = len(tree.resource_names)
    made = (
        allocation,
        np.asarray(indexes, dtype=np.int64),
        np.asarray(vectors, dtype=np.int64).reshape(len(vectors), width),
    )
    known[id(allocation)] = made
    return made


def _domains_that_could_hold(
    ledger: CapacityLedger,
    level: int,
    candidates: Sequence[JobView],
    held: Sequence[_Held],
    needed: IntArray,
) -> list[tuple[tuple[int, int], list[JobView]]]:
    """The node ranges of the domains (of ``level``) where some candidate holds capacity and
    whose free capacity plus all the candidates hold there covers what the gang needs in
    total — a bound checked before any trial eviction (no set of victims frees more than all
    of them, and the gang must fit inside the domain) — each with its candidates, in order."""
    tree = ledger.tree
    if level == WHOLE_CLUSTER:
        domain_of_node = np.zeros(len(tree.nodes), dtype=np.int64)
        starts = np.asarray([0, len(tree.nodes)], dtype=np.int64)
    else:
        index = tree.levels[level]
        domain_of_node, starts = index.domain_of_node, index.node_start
    room = np.add.reduceat(ledger.free, starts[:-1], axis=0) if len(tree.nodes) else None
    local: dict[int, list[JobView]] = {}
    for job, (_, indexes, vectors) in zip(candidates, held, strict=True):
        if not len(indexes):
            continue
        domains = domain_of_node[indexes]
        np.add.at(room, domains, vectors)  # type: ignore[arg-type]
        for domain in dict.fromkeys(domains.tolist()):
            local.setdefault(domain, []).append(job)
    could = [d for d in sorted(local) if bool(np.all(room[d] >= needed))]  # type: ignore[index]
    return [((int(starts[d]), int(starts[d + 1])), local[d]) for d in could]


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
    trial_ledger, trial_book = ledger.scratch(), book.copy()
    chosen: list[JobView] = []
    for victim in candidates:
        if not may_evict(victim, trial_book):
            continue
        _evict(trial_ledger, trial_book, victim, budget.held)
        chosen.append(victim)
        if not budget.take():
            return None
        if _fits(trial_ledger, trial_book, search, start, end):
            return _pruned(ledger, book, search, chosen, domain, budget.held)
    return None


def _pruned(
    ledger: CapacityLedger,
    book: QuotaBook,
    search: VictimSearch,
    chosen: list[JobView],
    domain: tuple[int, int],
    held: dict[int, _Held],
) -> list[JobView]:
    """Drop victims (the earliest chosen first) that the job turns out not to need."""
    start, end = domain
    kept = list(chosen)
    for victim in chosen[:-1]:
        without = [job for job in kept if job is not victim]
        trial_ledger, trial_book = ledger.scratch(), book.copy()
        for job in without:
            _evict(trial_ledger, trial_book, job, held)
        if _fits(trial_ledger, trial_book, search, start, end):
            kept = without
    return kept


def _evict(
    ledger: CapacityLedger, book: QuotaBook, victim: JobView, held: dict[int, _Held]
) -> None:
    if victim.allocation is None:
        return
    _, indexes, vectors = _held(ledger.tree, victim, held)
    if len(indexes):
        ledger.charge_nodes(indexes, -vectors)
    for flavor, amount in victim.allocation.usage.items():
        book.release(victim.team, flavor, amount)


def _fits(
    ledger: CapacityLedger, book: QuotaBook, search: VictimSearch, start: int, end: int
) -> bool:
    if not book.check(search.job.team, search.flavor, total_demand(search.job)).verdict.admissible:
        return False
    scope = ledger if (start, end) == (0, len(ledger.tree.nodes)) else confined(ledger, start, end)
    return place_workload(scope, search.workload)[0].admitted
