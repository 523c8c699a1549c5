"""Placing a whole workload, all or nothing: pod sets in order, groups together, each on the
capacity the earlier ones left (a scratch ledger; the caller's ledger is never changed)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import numpy as np

from topoq.core.eligibility import Eligibility, eligibility_of
from topoq.core.gpu_devices import GpuAsk, devices_for_pods
from topoq.core.ledger import CapacityLedger
from topoq.core.placement.descent import descend, place_in_topology
from topoq.core.placement.diagnosis import diagnose
from topoq.core.placement.fit import Room, pods_per_leaf, room_by_level
from topoq.core.placement.packing import pack_one
from topoq.core.placement.request import Demand, SearchPlan, demand_of, plan_search
from topoq.core.placement.search import Affinity, LeafTake, affinity_of, rank_domains
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.errors import InvalidRequestError
from topoq.domain.placement import (
    DomainAssignment,
    PlacementReason,
    PlacementResult,
    PodSetDiagnosis,
    PodSetOutcome,
)
from topoq.domain.workload import PodSetSpec, WorkloadSpec

MAX_GROUP_TRIALS = 64
"""Candidate domains tried for a pod-set group before giving up (each is a full trial)."""


DevicePicks = Mapping[int, tuple[tuple[int, ...], ...]]
"""Per node (by index), the GPU devices each pod placed there takes, in rank order: where
devices are kept one by one (nodes open to GPU shares)."""


@dataclass(frozen=True)
class PodSetQuery:
    """A pod set with everything derived from the tree that placing it needs."""

    pod_set: PodSetSpec
    plan: SearchPlan
    demand: Demand
    eligibility: Eligibility
    picked: dict[str, DevicePicks] | None = field(default=None, compare=False)
    """Where each charge records the devices it gave the pod set's pods (by pod-set name;
    the last charge, the one that stays, wins)."""

    def room(self, ledger: CapacityLedger) -> Room:
        return room_by_level(
            ledger.tree, pods_per_leaf(ledger, self.demand, self.eligibility), self.plan
        )

    def charge(
        self, ledger: CapacityLedger, leaves: Sequence[LeafTake], device: int | None = None
    ) -> None:
        """Take ``leaves`` on ``ledger`` (``device``: the device a pod that shares one takes
        on the one leaf, where packing chose it; else the tightest that holds it)."""
        tree = ledger.tree
        if tree.leaves_are_nodes:
            taken = np.asarray(leaves, dtype=np.int64).reshape(-1, 2)
            amounts = taken[:, 1:2] * self.demand.vector
            if self.demand.devices is not None:
                picks = self._take_devices(ledger, leaves, amounts, device)
                if self.picked is not None:
                    self.picked[self.pod_set.name] = picks
            ledger.charge_nodes(taken[:, 0], amounts)
            return
        for leaf, pods in leaves:
            start, end = tree.leaf_level.node_start[leaf], tree.leaf_level.node_start[leaf + 1]
            eligible = (node for node in range(start, end) if self.eligibility.mask[node])
            ledger.charge_pool(eligible, self.demand.vector * pods)

    def _take_devices(
        self,
        ledger: CapacityLedger,
        leaves: Sequence[LeafTake],
        amounts: IntArray,
        device: int | None = None,
    ) -> DevicePicks:
        """On the nodes open to GPU shares, the devices each pod takes (``devices_for_pods``),
        added to ``amounts`` (a row per leaf) as each device's share. (``topoq.io/gpu-milli``
        counts only shares, as the pods ask it: what a node holds in GPUs is then always its
        ``nvidia.com/gpu`` plus its thousandths, and the devices decide what fits.)"""
        tree = ledger.tree
        ask = cast(GpuAsk, self.demand.devices)
        picks: dict[int, tuple[tuple[int, ...], ...]] = {}
        for row, (node, pods) in enumerate(leaves):
            if not tree.shares_gpus[node]:
                continue
            per_pod, used = devices_for_pods(
                ledger.free[node, tree.device_columns],
                ask,
                pods,
                f"node {tree.nodes[node].name}",
                device,
            )
            amounts[row, tree.device_columns] += used
            picks[int(node)] = per_pod
        return picks

    def diagnose(self, ledger: CapacityLedger) -> PodSetDiagnosis:
        return diagnose(
            ledger, self.pod_set, self.plan, self.demand, self.eligibility, self.room(ledger)
        )


def find_placement(
    ledger: CapacityLedger, workload: WorkloadSpec, previous_nodes: Iterable[str] = ()
) -> PlacementResult:
    """Where every pod of ``workload`` goes, or why it does not fit. ``ledger`` is unchanged."""
    return place_workload(ledger, workload, previous_nodes=previous_nodes)[0]


def place_workload(
    ledger: CapacityLedger, workload: WorkloadSpec, previous_nodes: Iterable[str] = ()
) -> tuple[PlacementResult, CapacityLedger]:
    """The placement and the capacity left after it (the input ledger when nothing fits).
    ``previous_nodes`` (where a requeued gang ran) break ties between equally good domains."""
    scratch = ledger.scratch()
    fewest: dict[str, dict[str, int]] = {}
    picked: dict[str, DevicePicks] = {}
    placed = _place_units(scratch, workload, previous_nodes, fewest, picked)
    return _result(ledger, workload, placed, fewest, scratch, picked)


def place_first_fit(
    ledger: CapacityLedger, workload: WorkloadSpec, previous_nodes: Iterable[str] = ()
) -> tuple[PlacementResult, CapacityLedger]:
    """``place_workload`` as a topology-oblivious scheduler places: each pod set's pods on the
    first leaves with room, in an order that knows nothing of the topology
    (``first_fit_order``), every pod set on its own (groups and topology requests unheeded),
    all or nothing. The baseline the simulator compares topoq's placement with
    (``PlacementMode.FIRST_FIT``); ``previous_nodes`` are unheeded too."""
    scratch = ledger.scratch()
    fewest: dict[str, dict[str, int]] = {}
    picked: dict[str, DevicePicks] = {}
    placed = _first_fit_units(scratch, workload, fewest, picked)
    return _result(ledger, workload, placed, fewest, scratch, picked)


def _result(
    ledger: CapacityLedger,
    workload: WorkloadSpec,
    placed: PlacedUnit | Failure,
    fewest: Mapping[str, Mapping[str, int]],
    scratch: CapacityLedger,
    picked: Mapping[str, DevicePicks],
) -> tuple[PlacementResult, CapacityLedger]:
    """The placement of ``placed`` (charged on ``scratch``, with the GPU devices ``picked``)
    and what it leaves, or the refusal of the pod set that did not fit and ``ledger`` as it
    was."""
    if isinstance(placed, tuple):
        failed_name, diagnosis = placed
        return _refusal(workload, failed_name, diagnosis()), ledger
    outcomes = tuple(
        _outcome(ledger, ps, placed[ps.name], fewest.get(ps.name, {}), picked.get(ps.name, {}))
        for ps in workload.pod_sets
    )
    return PlacementResult(workload.name, outcomes), scratch


def first_fit_fits(ledger: CapacityLedger, workload: WorkloadSpec) -> bool:
    """Whether ``place_first_fit`` would admit the workload (a victim search's trial)."""
    return not isinstance(_first_fit_units(ledger.scratch(), workload), tuple)


def _first_fit_units(
    scratch: CapacityLedger,
    workload: WorkloadSpec,
    fewest: dict[str, dict[str, int]] | None = None,
    picked: dict[str, DevicePicks] | None = None,
) -> PlacedUnit | Failure:
    tree = scratch.tree
    order = first_fit_order(tree)
    placed: PlacedUnit = {}
    for pod_set in workload.pod_sets:
        query = query_for(scratch, pod_set, picked)
        leaf_pods = pods_per_leaf(scratch, query.demand, query.eligibility)
        if fewest is not None:
            by_level = room_by_level(tree, leaf_pods, query.plan)
            fewest[pod_set.name] = fewest_domains(tree, by_level, pod_set.count)
        room = leaf_pods[order]
        taken = np.cumsum(room)
        count = pod_set.count
        if not len(taken) or taken[-1] < count:
            return pod_set.name, partial(query.diagnose, scratch)
        last = int(np.searchsorted(taken, count))  # the leaf that takes the last pod
        pods = room[: last + 1].copy()
        pods[last] -= int(taken[last]) - count
        leaves = sorted(
            (int(leaf), int(n)) for leaf, n in zip(order[: last + 1], pods, strict=True) if n
        )  # in tree order, as a placement's outcome lists them
        query.charge(scratch, leaves)
        placed[pod_set.name] = leaves
    return placed


def first_fit_order(tree: TopologyTree) -> IntArray:
    """The leaves in an order that knows nothing of the topology: sorted by a hash of each
    leaf's name (a node's, or its labels' for a pooled leaf), the same on every run; memoized
    on the tree."""
    key = "first-fit order"
    known = tree.memo(key)
    if isinstance(known, np.ndarray):
        return known
    level = tree.depth - 1
    names = [
        tree.nodes[leaf].name if tree.leaves_are_nodes else "/".join(tree.levels[level].paths[leaf])
        for leaf in range(tree.leaf_level.size)
    ]
    order = np.asarray(
        sorted(range(len(names)), key=lambda leaf: zlib.crc32(names[leaf].encode())),
        dtype=np.int64,
    )
    order.setflags(write=False)
    tree.remember(key, order)
    return order


def workload_fits(ledger: CapacityLedger, workload: WorkloadSpec) -> bool:
    """Whether ``place_workload`` would admit the workload, without the placement's outcome or
    a refusal's diagnosis: what a victim search's trial asks, many times a search."""
    return not isinstance(_place_units(ledger.scratch(), workload, ()), tuple)


def _place_units(
    scratch: CapacityLedger,
    workload: WorkloadSpec,
    previous_nodes: Iterable[str],
    fewest: dict[str, dict[str, int]] | None = None,
    picked: dict[str, DevicePicks] | None = None,
) -> PlacedUnit | Failure:
    """Every placement unit of the workload placed on ``scratch`` (charged), or the first
    that does not fit; ``fewest``: filled with each pod set's ``fewest_domains`` (a pod set
    placed alone) when given; ``picked``: with the GPU devices its pods take."""
    queries = {ps.name: query_for(scratch, ps, picked) for ps in workload.pod_sets}
    placed: PlacedUnit = {}
    affinity = affinity_of(scratch.tree, previous_nodes)
    for unit in _placement_units(workload):
        members = [queries[pod_set.name] for pod_set in unit]
        found = _place_unit(scratch, members, affinity, fewest)
        if isinstance(found, tuple):
            return found
        placed.update(found)
    return placed


def query_for(
    ledger: CapacityLedger, pod_set: PodSetSpec, picked: dict[str, DevicePicks] | None = None
) -> PodSetQuery:
    tree = ledger.tree
    return PodSetQuery(
        pod_set,
        _plan_on(tree, pod_set),
        _demand_on(tree, pod_set),
        eligibility_of(tree, pod_set),
        picked,
    )


def _plan_on(tree: TopologyTree, pod_set: PodSetSpec) -> SearchPlan:
    """The pod set's search plan, memoized on the tree: it depends only on the topology
    request (the pod set's name enters only the message of a request that is rejected, and a
    rejected request is never remembered). A cycle asks for the same few shapes many times."""
    key = ("search-plan", pod_set.topology)
    known = tree.memo(key)
    if isinstance(known, SearchPlan):
        return known
    plan = plan_search(tree.spec, pod_set)
    tree.remember(key, plan)
    return plan


def _demand_on(tree: TopologyTree, pod_set: PodSetSpec) -> Demand:
    """The pod set's per-pod demand vector, memoized on the tree (it depends only on the
    requests; the arrays are read-only, as they are shared by every query of the shape)."""
    key = ("demand", pod_set.requests)
    known = tree.memo(key)
    if isinstance(known, Demand):
        return known
    demand = demand_of(tree, pod_set.requests)
    demand.vector.setflags(write=False)
    demand.columns.setflags(write=False)
    tree.remember(key, demand)
    return demand


def _placement_units(workload: WorkloadSpec) -> list[list[PodSetSpec]]:
    """Pod sets in order; the members of a group form one unit at the first member's place."""
    units: list[list[PodSetSpec]] = []
    by_group: dict[str, list[PodSetSpec]] = {}
    for pod_set in workload.pod_sets:
        group = pod_set.topology.group
        if group is None:
            units.append([pod_set])
        elif group in by_group:
            _check_group_member(by_group[group][0], pod_set, group)
            by_group[group].append(pod_set)
        else:
            by_group[group] = [pod_set]
            units.append(by_group[group])
    return units


def _check_group_member(first: PodSetSpec, member: PodSetSpec, group: str) -> None:
    """Members share the group's domain: the same required level (or, when none is required,
    the same preferred level). Preferences below a shared required level may differ."""
    mine, theirs = member.topology, first.topology
    same = (
        mine.required == theirs.required
        if theirs.required or mine.required
        else (mine.preferred == theirs.preferred)
    )
    if not same:
        raise InvalidRequestError(
            f"pod sets {first.name!r} and {member.name!r} share group {group!r} but request "
            "different topology levels for it",
            where=f"pod set {member.name!r}",
            hint="give every member of a group the same required level "
            "(or the same preferred level when none is required)",
        )


PlacedUnit = dict[str, list[LeafTake]]
Failure = tuple[str, Callable[[], PodSetDiagnosis]]
"""The pod set that did not fit, and its diagnosis when asked for (a trial asks none)."""


def _place_unit(
    scratch: CapacityLedger,
    members: list[PodSetQuery],
    affinity: Affinity | None,
    fewest: dict[str, dict[str, int]] | None = None,
) -> PlacedUnit | Failure:
    """Place one pod set, or a group in one shared domain; charge ``scratch`` on success."""
    for query in members:
        room = query.room(scratch)
        packed = _packed(scratch, query, room) if len(members) == 1 else None
        leaves: list[LeafTake] | None
        if packed is not None:
            node, device = packed
            leaves = [(node, 1)]
        else:
            device = None
            leaves = place_in_topology(
                scratch.tree, room, query.plan, query.pod_set.count, affinity
            )
        if leaves is None:
            return query.pod_set.name, partial(query.diagnose, scratch)
        if len(members) == 1:
            if fewest is not None:
                fewest[query.pod_set.name] = fewest_domains(scratch.tree, room, query.pod_set.count)
            query.charge(scratch, leaves, device)
            return {query.pod_set.name: leaves}
    return _place_group(scratch, members, affinity)


def _packed(
    scratch: CapacityLedger, query: PodSetQuery, room: Room
) -> tuple[int, int | None] | None:
    """Where a pod set of one pod goes by fragmentation (``placement.packing``), on a ledger
    that packs so; None: placed by the descent."""
    if scratch.packing is None or query.pod_set.count != 1:
        return None
    return pack_one(scratch, query.pod_set, room.at(scratch.tree.depth - 1))


def fewest_domains(tree: TopologyTree, room: Room, pods: int) -> dict[str, int]:
    """Per level (by label, the top first), the fewest of its domains that could take ``pods``
    pods of the shape whose ``room`` the free capacity gives, each level on its own: a lower
    bound on any placement's span at that moment, which a placement meets at every level only
    when it is as tight as the free capacity allowed (empty when they do not fit at all)."""
    found: dict[str, int] = {}
    for level, index in enumerate(tree.levels):
        fewest = _fewest_holding(room.at(level), pods)
        if fewest is None:
            return {}
        found[index.label] = fewest
    return found


def _fewest_holding(rooms: IntArray, pods: int) -> int | None:
    """How many of the domains with ``rooms`` (pods each) hold ``pods`` together, the
    roomiest first: counted by room size (``bincount``), not sorted — a cycle asks this for
    every gang it places, and at the node level there are thousands of domains."""
    if not len(rooms) or pods <= 0:
        return 0 if pods <= 0 else None
    roomiest = int(rooms.max())
    if roomiest >= pods:
        return 1
    if roomiest == 1:  # whole-node pods at the node level: one pod a domain
        return pods if int(rooms.sum()) >= pods else None
    sizes = np.bincount(rooms)[::-1]  # how many domains of each room, the largest first
    values = np.arange(len(sizes) - 1, -1, -1)
    reached = np.cumsum(sizes * values)
    if reached[-1] < pods:
        return None
    at = int(np.searchsorted(reached, pods))  # the room size the last domain taken has
    before = int(reached[at - 1]) if at else 0
    taken = int(sizes[:at].sum()) if at else 0
    return taken + math.ceil((pods - before) / int(values[at]))


def _place_group(
    scratch: CapacityLedger, members: list[PodSetQuery], affinity: Affinity | None
) -> PlacedUnit | Failure:
    ordered = sorted(members, key=lambda query: -query.pod_set.count)
    primary = ordered[0]
    rooms = [query.room(scratch) for query in ordered]
    tree = scratch.tree
    for level in primary.plan.search_levels:
        fits_all = np.ones(tree.levels[level].size, dtype=np.bool_)
        for query, room in zip(ordered, rooms, strict=True):
            fits_all &= room.at(level) >= query.pod_set.count
        candidates = np.flatnonzero(fits_all)
        if not len(candidates):
            continue
        ranked = rank_domains(tree, rooms[0], level, candidates, primary.pod_set.count, affinity)
        for domain in ranked[:MAX_GROUP_TRIALS]:
            placed = _try_group_in(scratch, ordered, level, int(domain), affinity)
            if placed is not None:
                return placed
    if primary.plan.split_at_top:
        return _place_members_apart(scratch, ordered, affinity)
    return primary.pod_set.name, partial(
        _group_diagnosis, tree.spec.levels[primary.plan.strictest_level], ordered
    )


def _try_group_in(
    scratch: CapacityLedger,
    members: list[PodSetQuery],
    level: int,
    domain: int,
    affinity: Affinity | None,
) -> PlacedUnit | None:
    trial = scratch.scratch()
    placed: PlacedUnit = {}
    for query in members:
        room = query.room(trial)
        if room.at(level)[domain] < query.pod_set.count:
            return None
        leaves = descend(trial.tree, room, level, domain, query.pod_set.count, affinity)
        query.charge(trial, leaves)
        placed[query.pod_set.name] = leaves
    for query in members:
        query.charge(scratch, placed[query.pod_set.name])
    return placed


def _place_members_apart(
    scratch: CapacityLedger, members: list[PodSetQuery], affinity: Affinity | None
) -> PlacedUnit | Failure:
    trial = scratch.scratch()
    placed: PlacedUnit = {}
    for query in members:
        leaves = place_in_topology(
            trial.tree, query.room(trial), query.plan, query.pod_set.count, affinity
        )
        if leaves is None:
            return query.pod_set.name, partial(query.diagnose, trial)
        query.charge(trial, leaves)
        placed[query.pod_set.name] = leaves
    for query in members:
        query.charge(scratch, placed[query.pod_set.name])
    return placed


def _group_diagnosis(label: str, members: list[PodSetQuery]) -> PodSetDiagnosis:
    names = ", ".join(repr(query.pod_set.name) for query in members)
    group = members[0].pod_set.topology.group
    return PodSetDiagnosis(
        PlacementReason.GROUP_UNSATISFIABLE,
        f"each pod set of group {group!r} fits alone, but no single {label} domain holds "
        f"{names} together",
        {
            "level": label,
            "group": str(group),
            "requested_pods": sum(query.pod_set.count for query in members),
        },
        {},
        (f"require a higher level than {label} for the group", "split the group"),
    )


def _refusal(workload: WorkloadSpec, failed: str, diagnosis: PodSetDiagnosis) -> PlacementResult:
    outcomes = []
    for pod_set in workload.pod_sets:
        if pod_set.name == failed:
            outcomes.append(PodSetOutcome(pod_set.name, pod_set.count, diagnosis=diagnosis))
            continue
        outcomes.append(
            PodSetOutcome(
                pod_set.name,
                pod_set.count,
                diagnosis=PodSetDiagnosis(
                    PlacementReason.GANG_INCOMPLETE,
                    f"not placed: pod set {failed!r} of the same workload does not fit "
                    "(all or nothing)",
                ),
            )
        )
    return PlacementResult(workload.name, tuple(outcomes))


def _outcome(
    ledger: CapacityLedger,
    pod_set: PodSetSpec,
    leaves: list[LeafTake],
    fewest: Mapping[str, int] | None = None,
    picked: DevicePicks | None = None,
) -> PodSetOutcome:
    tree = ledger.tree
    leaf_level = tree.depth - 1
    hosts = tree.leaves_are_nodes
    assignments: list[DomainAssignment] = []
    rank = 0
    for leaf, pods in leaves:
        node = tree.nodes[leaf].name if hosts else None
        labels = tree.domain_labels(leaf_level, leaf)
        devices = picked.get(leaf, ()) if picked else ()
        assignments.append(DomainAssignment(node, labels, pods, rank, devices))
        rank += pods
    return PodSetOutcome(
        pod_set.name,
        pod_set.count,
        tuple(assignments),
        span=_span(tree, leaves),
        best_span=fewest or {},
    )


def _span(tree: TopologyTree, leaves: list[LeafTake]) -> dict[str, int]:
    """How many distinct domains of each level hold ``leaves``, all levels at once: the leaves
    come in tree order (the descent sorts them) and every domain covers a contiguous range of
    nodes, so along the leaves each level's domain index never decreases and the distinct
    domains are one more than the steps between neighbours — no sort per level."""
    first_nodes = tree.leaf_level.node_start[[leaf for leaf, _ in leaves]]
    if not len(first_nodes):
        return {level.label: 0 for level in tree.levels}
    domains = _domains_of_nodes(tree)[:, first_nodes]
    steps = np.count_nonzero(domains[:, 1:] != domains[:, :-1], axis=1)
    return {level.label: int(count) + 1 for level, count in zip(tree.levels, steps, strict=True)}


def _domains_of_nodes(tree: TopologyTree) -> IntArray:
    """Row ``l``: the domain of level ``l`` of every node (memoized on the tree)."""
    key = "domains-of-nodes"
    known = tree.memo(key)
    if isinstance(known, np.ndarray):
        return known
    matrix = np.stack([level.domain_of_node for level in tree.levels]).reshape(
        tree.depth, len(tree.nodes)
    )
    matrix.setflags(write=False)
    tree.remember(key, matrix)
    return matrix
