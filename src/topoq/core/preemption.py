"""Choosing victims, topology-aware: the smallest set of evictable jobs whose capacity, once
freed, lets the waiting gang fit *inside one domain* — never scattered GPUs it cannot use. If
no set of victims makes the gang fit, nobody is evicted."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from topoq.core.holdings import total_demand
from topoq.core.ledger import CapacityLedger, confined
from topoq.core.placement import first_fit_fits, workload_fits
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

    def __init__(self, trials: int, held: Mapping[int, HeldArrays] | None = None) -> None:
        self.left = trials
        self.spent = False
        self.held: dict[int, HeldArrays] = dict(held or {})
        """Each candidate's nodes and what it holds on each, as arrays (by the ``id`` of its
        allocation, which is kept beside them): worked out once for all the cycle's searches
        (``held``: those a cycle before worked out, for allocations that still hold)."""
        self.entries = _Entries(self.held)
        """The same, every candidate's rows in one array, for the searches' bounds."""

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
    topology_aware: bool = True
    """Victims searched domain by domain (the smallest that can hold the gang first); else
    over the whole cluster at once, as a scheduler without topology-aware preemption."""
    first_fit: bool = False
    """Trials placed as a topology-oblivious scheduler places (``place_first_fit``)."""


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
    and a search that starts with it spent tries nothing. A domain is tried only while victims
    there could rank before the best found so far at its level (``_could_beat``)."""
    budget = budget or TrialBudget(UNBOUNDED)
    if not candidates or budget.spent:
        return None
    tree = ledger.tree
    needed = tree.resource_vector(search.workload.total_requests)
    held = budget.entries.of(tree, candidates)
    levels = _scope_levels(tree, search.workload) if search.topology_aware else [WHOLE_CLUSTER]
    for level in levels:
        best: _Chosen | None = None
        domains = _domains_that_could_hold(ledger, level, candidates, held, needed)
        for at, least_important in enumerate(domains.first_ranks):
            if best is not None and best.key[0] == 1 and least_important >= best.key[1][0]:
                continue  # the usual: one victim found, none here less important (cheap)
            domain = domains.at(at)
            if best is not None and not _could_beat(best, domain, needed):
                continue
            chosen = _victims_in(
                ledger, book, search, domain.candidates, may_evict, domain.nodes, budget
            )
            if chosen:
                ranks = {
                    id(job): rank for rank, job in zip(domain.ranks, domain.candidates, strict=True)
                }
                key = (len(chosen), sorted(ranks[id(job)] for job in chosen))
                if best is None or key < best.key:
                    best = _Chosen(key, chosen)
        if budget.spent:
            return None
        if best is not None:
            return best.chosen
    return None


class _Chosen(NamedTuple):
    """The best victims found so far at a level, and how they rank: fewest victims, then the
    least important (their positions in eviction order, sorted)."""

    key: tuple[int, list[int]]
    chosen: list[JobView]


class _Domain(NamedTuple):
    """A domain where victims could make the gang fit, as the bound found it."""

    nodes: tuple[int, int]
    """Its node range."""
    candidates: list[JobView]
    """The candidates holding capacity in it, in eviction order."""
    ranks: list[int]
    """Their positions in eviction order (ascending)."""
    holdings: IntArray
    """What each of them holds inside the domain (one row each)."""
    free: IntArray
    """The domain's free capacity."""


def _could_beat(best: _Chosen, domain: _Domain, needed: IntArray) -> bool:
    """Whether victims in ``domain`` could rank before ``best`` (a bound, before any trial):
    no set of victims smaller than the fewest whose holdings there cover what the domain
    lacks frees enough, and a set of that many ranks no better than the domain's that many
    least important candidates. A domain that cannot is skipped: the level's choice is the
    same (the first best found is kept), at no trial's cost."""
    fewest_victims, best_ranks = best.key
    if fewest_victims == 1 and domain.ranks[0] >= best_ranks[0]:
        return False  # the usual: one victim found; this domain's least important is not less
    lacking = needed - domain.free
    fewest = 1
    for column in np.flatnonzero(lacking > 0):
        covered = np.cumsum(np.sort(domain.holdings[:, column])[::-1])
        reaching = int(np.searchsorted(covered, lacking[column])) + 1
        if reaching > len(domain.candidates):
            return False  # all of them together do not cover it
        fewest = max(fewest, reaching)
    return (fewest, domain.ranks[:fewest]) < best.key


HeldArrays = tuple[object, IntArray, IntArray]
"""An allocation (kept, so that its ``id`` stays its own), its node indexes, and what it holds
on each (one row per node)."""


def _held(tree: TopologyTree, job: JobView, known: dict[int, HeldArrays]) -> HeldArrays:
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


class _Entries:
    """What every candidate met in a cycle holds, one row per node it holds (its rows of
    ``_held``) in one array, so that a search's bound takes its candidates' rows at once
    instead of gathering them one candidate at a time."""

    def __init__(self, held: dict[int, HeldArrays]) -> None:
        self._held = held
        self._slots: dict[int, tuple[int, object]] = {}
        """Each allocation's slot, by ``id`` (the allocation kept, so the id stays its own)."""
        self._pending: list[HeldArrays] = []
        """Allocations given a slot but not yet in the arrays."""
        self.indexes: IntArray = np.zeros(0, dtype=np.int64)
        self.vectors: IntArray | None = None
        self.slot_of_row: IntArray = np.zeros(0, dtype=np.int64)

    def of(self, tree: TopologyTree, candidates: Sequence[JobView]) -> _CandidateRows:
        """The rows of ``candidates``: node indexes, what is held on each, and the position
        in ``candidates`` of the one holding it."""
        known, slot = self._slots.get, self._slot
        slots = []
        for job in candidates:  # most were met before: their slot, written out
            found = known(id(job.allocation))
            slots.append(
                found[0] if found is not None and found[1] is job.allocation else slot(tree, job)
            )
        if self._pending or self.vectors is None:
            self._take_pending(tree)
        assert self.vectors is not None
        member = np.full(len(self._slots), -1, dtype=np.int64)
        member[slots] = np.arange(len(candidates), dtype=np.int64)
        owner = member[self.slot_of_row]
        inside = owner >= 0
        return self.indexes[inside], self.vectors[inside], owner[inside]

    def _slot(self, tree: TopologyTree, job: JobView) -> int:
        allocation = job.allocation
        found = self._slots.get(id(allocation))
        if found is not None and found[1] is allocation:
            return found[0]
        slot = len(self._slots)
        self._slots[id(allocation)] = (slot, allocation)
        self._pending.append(_held(tree, job, self._held))
        return slot

    def _take_pending(self, tree: TopologyTree) -> None:
        first = len(self._slots) - len(self._pending)
        width = len(tree.resource_names)
        before = self.vectors if self.vectors is not None else np.zeros((0, width), np.int64)
        self.indexes = np.concatenate([self.indexes, *(held[1] for held in self._pending)])
        self.vectors = np.concatenate([before, *(held[2] for held in self._pending)])
        self.slot_of_row = np.concatenate(
            [
                self.slot_of_row,
                np.repeat(
                    np.arange(first, first + len(self._pending), dtype=np.int64),
                    [len(held[1]) for held in self._pending],
                ),
            ]
        )
        self._pending = []


_CandidateRows = tuple[IntArray, IntArray, IntArray]
"""Node indexes, what is held on each, and whose (a position among the candidates)."""


class _Domains:
    """The domains the bound left (``_domains_that_could_hold``), in order: the least
    important candidate of each at once, each domain itself only when asked for (at 16,384
    nodes a level may leave hundreds, and most are passed over on their least important
    candidate alone)."""

    def __init__(
        self,
        starts: IntArray,
        candidates: Sequence[JobView],
        free: IntArray,
        pairs: tuple[IntArray, IntArray, IntArray],
        bounds: list[int],
    ) -> None:
        self._starts, self._candidates, self._free = starts, candidates, free
        self._domain, self._rank, self._holdings = pairs
        self._bounds = bounds
        self.first_ranks: list[int] = self._rank[bounds[:-1]].tolist() if len(bounds) > 1 else []
        """The position in eviction order of each domain's least important candidate."""

    def __len__(self) -> int:
        return len(self.first_ranks)

    def __iter__(self) -> Iterator[_Domain]:
        return (self.at(position) for position in range(len(self)))

    def at(self, position: int) -> _Domain:
        first, last = self._bounds[position], self._bounds[position + 1]
        domain = int(self._domain[first])
        ranks = self._rank[first:last].tolist()
        return _Domain(
            (int(self._starts[domain]), int(self._starts[domain + 1])),
            [self._candidates[rank] for rank in ranks],
            ranks,
            self._holdings[first:last],
            self._free[domain],
        )


_NO_DOMAINS = _Domains(
    np.zeros(1, dtype=np.int64),
    (),
    np.zeros((0, 0), dtype=np.int64),
    (np.zeros(0, dtype=np.int64),) * 3,
    [0],
)


def _domains_that_could_hold(
    ledger: CapacityLedger,
    level: int,
    candidates: Sequence[JobView],
    held: _CandidateRows,
    needed: IntArray,
) -> _Domains:
    """The domains (of ``level``) where some candidate holds capacity and whose free capacity
    plus all the candidates hold there covers what the gang needs in total — a bound checked
    before any trial eviction (no set of victims frees more than all of them, and the gang
    must fit inside the domain) — in order, each with its candidates in order. Worked out
    for all candidates and domains at once."""
    tree = ledger.tree
    if level == WHOLE_CLUSTER:
        domain_of_node = np.zeros(len(tree.nodes), dtype=np.int64)
        starts = np.asarray([0, len(tree.nodes)], dtype=np.int64)
    else:
        index = tree.levels[level]
        domain_of_node, starts = index.domain_of_node, index.node_start
    indexes, vectors, owner = held
    if not len(indexes) or not len(tree.nodes):
        return _NO_DOMAINS
    domains = domain_of_node[indexes]
    free = np.add.reduceat(ledger.free, starts[:-1], axis=0)
    room = free.copy()
    np.add.at(room, domains, vectors)
    could = np.asarray((room >= needed).all(axis=1), dtype=bool)
    inside = could[domains]
    if not inside.any():
        return _NO_DOMAINS
    pairs, pair_of = np.unique(
        domains[inside] * len(candidates) + owner[inside], return_inverse=True
    )  # by domain, then by rank
    holdings = np.zeros((len(pairs), vectors.shape[1]), dtype=np.int64)
    np.add.at(holdings, pair_of.reshape(-1), vectors[inside])
    pair_domain, pair_rank = np.divmod(pairs, len(candidates))
    bounds = [0, *(np.flatnonzero(np.diff(pair_domain)) + 1).tolist(), len(pairs)]
    return _Domains(starts, candidates, free, (pair_domain, pair_rank, holdings), bounds)


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
    trial: tuple[CapacityLedger, QuotaBook] | None = None  # copied at the first eviction
    chosen: list[JobView] = []
    for victim in candidates:
        if not may_evict(victim, book if trial is None else trial[1]):
            continue
        if trial is None:
            trial = ledger.scratch(), book.copy()
        trial_ledger, trial_book = trial
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
    held: dict[int, HeldArrays],
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
    ledger: CapacityLedger, book: QuotaBook, victim: JobView, held: dict[int, HeldArrays]
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
    fits = first_fit_fits if search.first_fit else workload_fits
    return fits(scope, search.workload)
