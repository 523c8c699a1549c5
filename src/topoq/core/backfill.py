"""Holding capacity for a waiting gang, its expected start, and backfill into it.

A **node hold** keeps capacity on some nodes for a gang that has quota: a domain of its
required level (:mod:`topoq.core.reservation`, the whole domain), or — once it starves — the
resources its placement takes at its expected start (:func:`capacity_to_hold`). A **quota
hold** (``admission.QuotaHold``) keeps a waiting job's demand in the books.

The **expected start** of a hold is computed from the time limits of running jobs (each ends
by ``started_at + limit``): the earliest of those ends after which the gang fits (placed on
the capacity free now plus what the jobs ended by then free; for quota: the check passes).
It is unknown (None) when the gang fits only once a job without a time limit ends; a starving
gang then holds the fewest whole nodes expected to free earliest (:func:`nodes_to_hold`).

**Backfill** (Slurm's rule): another job may use held capacity only if its own time limit
ends by the hold's expected start (``now + limit <= expected start``), so it can never delay
the gang. A job without a time limit never backfills, and nothing backfills into a hold whose
expected start is unknown.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from topoq.core.holdings import rows_on_nodes
from topoq.core.ledger import CapacityLedger, confined
from topoq.core.placement import place_workload
from topoq.core.quota import QuotaBook
from topoq.core.time_limits import end_by_limit, time_limit_of
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName
from topoq.domain.job import JobId, JobView
from topoq.domain.node import NodeName
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec

NEVER = float("inf")
"""The free time of a node a job without a time limit runs on."""

Ending = tuple[float, JobView]
"""A job holding capacity and when it ends by its time limit."""


@dataclass(frozen=True, eq=False)
class NodeHold:
    """Capacity kept for ``job``: other jobs of the cycle use it only to backfill."""

    job: JobId
    nodes: IntArray
    """Node indexes of the tree, distinct."""
    amounts: IntArray
    """A resource vector per node of ``nodes``: what is held there (its capacity: all)."""
    name: str
    """What is held, for messages: a domain's name, or ``4 node(s)``."""
    expected_start: float | None
    borrowing: bool = False
    """The gang would borrow: jobs that run within their team's guarantee are not bound."""


def may_backfill(
    policy: ClusterPolicy, job: JobView, now: float, expected_start: float | None
) -> bool:
    """Whether ``job`` may use capacity held for a gang expected to start at
    ``expected_start``: only when its time limit ends by then."""
    return backfills(time_limit_of(policy, job), now, expected_start)


def backfills(limit_s: float | None, now: float, expected_start: float | None) -> bool:
    """Whether a job with time limit ``limit_s`` started ``now`` ends by ``expected_start``."""
    return expected_start is not None and limit_s is not None and now + limit_s <= expected_start


def endings(holders: Iterable[JobView], policy: ClusterPolicy, now: float) -> Endings:
    """The holders that have a time limit, with the end it promises, earliest first."""
    if not policy.classes_limit_time:  # only a job's own limit counts: most have none
        holders = [job for job in holders if job.spec.time_limit_s is not None]
    ends = [(end, job) for job in holders if (end := end_by_limit(policy, job, now)) is not None]
    return Endings(sorted(ends, key=lambda pair: (pair[0], pair[1].id)))


class Endings(list[Ending]):
    """``endings``, and what the first ``count`` of them give back once they have ended,
    summed: their quota per team and flavor, their capacity per node. The sums are worked out
    once per list, so the binary searches over the count (expected starts, holds) that every
    waiting job's answer asks for cost a look-up and a few releases per step, not a release
    per running job per step. Releasing the sums leaves the books and a ledger as releasing
    the jobs one by one does (both are additive; quota is never below zero either way)."""

    __slots__ = ("_capacity", "_quota")

    def __init__(self, items: Iterable[Ending] = ()) -> None:
        super().__init__(items)
        self._quota: dict[tuple[TeamName, FlavorName], tuple[list[int], list[Resources]]] | None
        self._quota = None
        self._capacity: tuple[TopologyTree, IntArray, IntArray, IntArray] | None = None

    def quota_released(
        self, count: int, team: TeamName | None = None
    ) -> dict[tuple[TeamName, FlavorName], Resources]:
        """What the first ``count`` give back, per team and flavor (none: left out); of
        ``team``'s jobs only, when given."""
        if self._quota is None:
            self._quota = {}
            for position, (_, job) in enumerate(self):
                if job.allocation is None:
                    continue
                for flavor, amount in job.allocation.usage.items():
                    positions, sums = self._quota.setdefault((job.team, flavor), ([], []))
                    positions.append(position)
                    sums.append(sums[-1] + amount if sums else amount)
        released = {}
        for key, (positions, sums) in self._quota.items():
            if team is not None and key[0] != team:
                continue
            taken = bisect.bisect_left(positions, count)
            if taken:
                released[key] = sums[taken - 1]
        return released

    def release_quota(self, book: QuotaBook, count: int, checked: TeamName | None = None) -> None:
        """Give ``book`` back the quota of the first ``count`` — of ``checked``'s jobs only
        when the book's check of that team depends on its own usage alone
        (``QuotaBook.on_own_usage``): the others' would change no answer about it."""
        only = checked if checked is not None and book.on_own_usage(checked) else None
        for (team, flavor), amount in self.quota_released(count, only).items():
            book.release(team, flavor, amount)

    def release_capacity(self, ledger: CapacityLedger, count: int) -> None:
        """Give ``ledger`` back the capacity of the first ``count`` (nodes that left its tree
        are skipped)."""
        tree = ledger.tree
        if self._capacity is None or self._capacity[0] is not tree:
            held = [job.allocation.resources_on_node if job.allocation else {} for _, job in self]
            nodes, rows = rows_on_nodes(tree, held)  # job after job
            on_tree = [sum(name in tree.node_index for name in on_nodes) for on_nodes in held]
            upto_of = np.concatenate(([0], np.cumsum(on_tree, dtype=np.int64)))
            self._capacity = (tree, nodes, rows, upto_of)
        _, nodes_of, rows, upto_of = self._capacity
        upto = int(upto_of[min(count, len(self))])
        if not upto:
            return
        given = np.zeros_like(tree.capacity)
        np.add.at(given, nodes_of[:upto], rows[:upto])
        touched = np.flatnonzero(given.any(axis=1))
        ledger.charge_nodes(touched, -given[touched])


def as_endings(ending: Sequence[Ending]) -> Endings:
    """``ending`` with its sums (``Endings``): the very list when it is one."""
    return ending if isinstance(ending, Endings) else Endings(ending)


def node_free_times(
    tree: TopologyTree, holders: Iterable[JobView], policy: ClusterPolicy, now: float
) -> np.ndarray:
    """Per node of the tree, when the jobs holding it have all ended by their time limits
    (``now`` when none holds it, ``NEVER`` when one has no limit)."""
    free_at = np.full(len(tree.nodes), now, dtype=np.float64)
    by_class = policy.classes_limit_time
    for job in holders:
        if job.allocation is None:
            continue
        ends = (
            end_by_limit(policy, job, now)
            if by_class or job.spec.time_limit_s is not None
            else None
        )
        for name in job.allocation.resources_on_node:
            index = tree.node_index.get(NodeName(name))
            if index is not None:
                free_at[index] = max(free_at[index], NEVER if ends is None else ends)
    return free_at


def first_fitting(count: int, fits: Callable[[int], bool], least: int = 0) -> int | None:
    """The least ``k`` in ``0..count`` with ``fits(k)``, for a ``fits`` that stays true once
    true; None when even ``fits(count)`` is false. A binary search; ``least``: a ``k`` below
    which ``fits`` is known to be false (it is not asked there)."""
    least = min(max(least, 0), count)
    if fits(least):
        return least
    if least == count or not fits(count):
        return None
    low, high = least + 1, count
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def capacity_to_hold(
    ledger: CapacityLedger,
    ending: Sequence[Ending],
    workload: WorkloadSpec,
    now: float,
    region: tuple[int, int] | None = None,
) -> tuple[IntArray, IntArray, float] | None:
    """(nodes, amounts, expected start): what ``workload``'s placement (on the nodes
    ``region[0]:region[1]`` only, when given) takes once the earliest of ``ending`` have
    ended — as few as make it fit; the expected start is the last of their ends (``now`` when
    it fits now). None when it does not fit even once all have."""

    released = as_endings(ending)

    def future(count: int) -> CapacityLedger:
        trial = ledger.scratch()
        released.release_capacity(trial, count)
        return trial if region is None else confined(trial, *region)

    count = first_fitting(len(ending), lambda k: place_workload(future(k), workload)[0].admitted)
    if count is None:
        return None
    before = future(count)
    after = place_workload(before, workload)[1]
    taken = before.free - after.free
    nodes = np.flatnonzero(taken.any(axis=1))
    start = ending[count - 1][0] if count else now
    return nodes, np.asarray(taken[nodes], dtype=np.int64), max(start, now)


def nodes_to_hold(
    tree: TopologyTree, candidates: IntArray, free_at: np.ndarray, workload: WorkloadSpec
) -> tuple[IntArray, float | None] | None:
    """The fewest of ``candidates``, earliest-freeing first, on which ``workload`` fits once
    they are empty, and when they are all free (None: unknown); None when it fits on none
    of them even empty (fitting on more nodes never fails where fitting on fewer did not)."""
    order = candidates[np.lexsort((candidates, free_at[candidates]))]
    key = ("nodes to hold", order.tobytes(), workload)  # the order, not the times: as ``now``
    known = tree.memo(key)  # moves, the free nodes' times move with it, and their order not
    if known is None:
        known = _nodes_to_hold(tree, order, workload)
        tree.remember_some(key, known, NODES_TO_HOLD_KEPT)
    if not isinstance(known, np.ndarray):
        return None
    start = float(free_at[known].max()) if len(known) else NEVER
    return known, None if start == NEVER else start


NODES_TO_HOLD_KEPT = 64
"""Answers of ``nodes_to_hold`` a tree keeps (the latest): a starving gang asks again every
cycle, and its answer changes only when the order the nodes are expected to free in does."""


def _nodes_to_hold(tree: TopologyTree, order: IntArray, workload: WorkloadSpec) -> IntArray | bool:
    """The fewest of the nodes ``order`` lists, first ones first, on which ``workload`` fits
    once they are empty, sorted (False: it fits on none of them even empty)."""

    def fits(count: int) -> bool:
        free = np.zeros_like(tree.capacity)
        chosen = order[:count]
        free[chosen] = tree.capacity[chosen]
        return place_workload(CapacityLedger(tree, free), workload)[0].admitted

    count = first_fitting(len(order), fits, _fewest_nodes(tree, order, workload))
    if count is None:
        return False
    return np.sort(order[:count])


def _fewest_nodes(tree: TopologyTree, candidates: IntArray, workload: WorkloadSpec) -> int:
    """A count of ``candidates`` below which the workload cannot fit: what it asks in all of
    a resource over the most one candidate has of it (one node holds at most that)."""
    if not len(candidates):
        return 0
    largest = tree.capacity[candidates].max(axis=0)
    asked = np.zeros_like(largest)
    for pod_set in workload.pod_sets:
        asked = asked + pod_set.count * tree.resource_vector(pod_set.requests)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_resource = np.where(asked > 0, np.ceil(asked / np.maximum(largest, 1)), 0)
    return int(per_resource.max()) if len(per_resource) else 0


def whole_nodes(tree: TopologyTree, nodes: IntArray) -> IntArray:
    """The amounts of a hold that keeps ``nodes`` whole."""
    return np.asarray(tree.capacity[nodes], dtype=np.int64)


def confined_to_unheld(ledger: CapacityLedger, holds: Sequence[NodeHold]) -> CapacityLedger:
    """A copy of ``ledger`` without the capacity ``holds`` keep."""
    if not holds:
        return ledger
    nodes = np.concatenate([hold.nodes for hold in holds])
    return ledger.without(nodes, np.concatenate([hold.amounts for hold in holds]))


def quota_free_at(
    book: QuotaBook, job: JobView, flavor: FlavorName, ending: Sequence[Ending], now: float
) -> float | None:
    """The earliest end among ``ending`` after which ``job``'s demand passes the quota check
    (the jobs ended by then release their quota; ``now`` when it passes now); None when it
    never does."""
    demand = job.spec.workload.total_requests
    released = as_endings(ending)

    def passes(count: int) -> bool:
        trial = book.copy()
        released.release_quota(trial, count, job.team)
        return trial.check(job.team, flavor, demand).verdict.admissible

    count = first_fitting(len(ending), passes)
    if count is None:
        return None
    return max(ending[count - 1][0], now) if count else now
