"""The cluster as the API shows it: nodes with what runs on them, the topology tree with free
and used GPUs per domain, and each team's quota (guarantee, used, borrowed, lent).

Every view here reads only the jobs that hold capacity (``Store.holding_jobs``, a query on the
phase index) and, for the teams' job counts, one grouped count: never the queue, so their cost
follows what runs, not how many jobs wait."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from topoq.api.service import Service
from topoq.core.fair_share import estimated_usage, fair_share_position, kept_half_life_s
from topoq.core.holdings import capacity_by_flavor, ledger_after, usage_by_team
from topoq.core.quota import QuotaBook
from topoq.core.tree import IntArray, TopologyTree, build_tree
from topoq.domain.governance import FlavorName, IdleAllocation, TeamName, TeamSpec
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE, gpu_number, gpus_held
from topoq.domain.job import Allocation, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.wire.v1 import (
    NodeHolderModel,
    NodeModel,
    TeamFlavorModel,
    TeamModel,
    TopologyDomainModel,
    TopologyModel,
    UnplacedNodeModel,
)
from topoq.wire.v1.convert import amounts


def holders(jobs: Iterable[JobView]) -> list[JobView]:
    return [job for job in jobs if job.phase.holds_capacity and job.allocation is not None]


def holding(service: Service) -> list[JobView]:
    """The jobs that hold capacity now (read without reading the queue)."""
    return holders(service.store.holding_jobs().values())


# --- nodes ---------------------------------------------------------------------------------
def node_models(
    nodes: Sequence[NodeSpec],
    running: Sequence[JobView],
    sees: Callable[[str], bool] = lambda team: True,
) -> list[NodeModel]:
    """``sees(team)``: whether the caller sees the team's jobs in full (their pods' ranks by
    pod set); of other teams' jobs a node shows id, team and GPUs only."""
    by_node = jobs_by_node(running)
    return [node_model(node, by_node.get(node.name, ()), sees) for node in nodes]


def jobs_by_node(running: Iterable[JobView]) -> dict[str, list[JobView]]:
    """The holding jobs with a pod on each node."""
    by_node: defaultdict[str, list[JobView]] = defaultdict(list)
    for job in running:
        if job.allocation is not None:
            for name in job.allocation.nodes:
                by_node[name].append(job)
    return by_node


def node_model(
    node: NodeSpec, on_node: Sequence[JobView], sees: Callable[[str], bool] = lambda team: True
) -> NodeModel:
    """``on_node``: the holding jobs with a pod on this node (``jobs_by_node``); ``sees`` as
    for ``node_models``."""
    holders = [
        NodeHolderModel(
            job=job.id,
            team=job.team,
            gpus=gpu_number(gpus_held(job.allocation.resources_on_node[node.name])),
            ranks=_ranks_on(job.allocation, node.name) if sees(job.team) else [],
            stopping=job.phase is JobPhase.PREEMPTING,
        )
        for job in sorted(on_node, key=lambda job: job.id)
        if job.allocation is not None
    ]
    used = sum(holder.gpus for holder in holders)
    return NodeModel(
        name=node.name,
        ready=node.ready,
        cordoned=node.unschedulable,
        labels=dict(node.labels),
        allocatable=amounts(node.allocatable),
        gpus=node.allocatable.amount(NVIDIA_GPU),
        gpus_used=used,
        jobs=sorted(job.id for job in on_node),
        holders=holders,
    )


def _ranks_on(allocation: Allocation, node: str) -> list[str]:
    """The allocation's pods on ``node``, as ``podSet:rank``."""
    return [
        f"{outcome.name}:{rank}"
        for outcome in allocation.placement.pod_sets
        for assignment in outcome.assignments
        if assignment.node == node
        for rank in range(assignment.first_rank, assignment.first_rank + assignment.count)
    ]


# --- topology ------------------------------------------------------------------------------
def topology_model(service: Service) -> TopologyModel:
    """Every node with its level labels, cordoned and failed ones included (their free GPUs
    count as zero: nothing new goes there)."""
    nodes = service.store.nodes()
    schedulable = {node.name for node in nodes if node.schedulable}
    shown = [replace(node, ready=True, unschedulable=False) for node in nodes]
    tree = build_tree(shown, service.topology)
    running = holding(service)
    column = tree.resource_column.get(NVIDIA_GPU)
    if column is None:
        total = used = np.zeros(len(tree.nodes), dtype=np.int64)
    else:
        total = tree.capacity[:, column] * GPU_MILLI_PER_GPU
        taken = ledger_after(tree, running).used()
        used = taken[:, column] * GPU_MILLI_PER_GPU
        share = tree.resource_column.get(GPU_SHARE)
        if share is not None:
            used = used + taken[:, share]
    open_nodes = np.asarray([node.name in schedulable for node in tree.nodes], dtype=bool)
    free = np.where(open_nodes, np.maximum(total - used, 0), 0) if len(tree.nodes) else used
    gpus = _GpuColumns(total, used, free)
    return TopologyModel(
        name=tree.spec.name,
        levels=list(tree.spec.levels),
        gpus=_in_gpus(total),
        gpus_used=_in_gpus(used),
        gpus_free=_in_gpus(free),
        domains=_domains(tree, gpus, 0, 0, tree.levels[0].size) if tree.levels else [],
        outside=[
            UnplacedNodeModel(name=e.name, reason=e.reason.value, detail=e.detail)
            for e in tree.excluded
        ],
    )


@dataclass(frozen=True)
class _GpuColumns:
    """GPUs per node of the tree, in tree order, in thousandths (shares included)."""

    total: IntArray
    used: IntArray
    free: IntArray


def _in_gpus(milli: IntArray) -> int | float:
    """Thousandths of GPUs, summed, as GPUs (``gpu_number``)."""
    return gpu_number(int(milli.sum()) / GPU_MILLI_PER_GPU)


def _domains(
    tree: TopologyTree, gpus: _GpuColumns, level: int, first: int, last: int
) -> list[TopologyDomainModel]:
    index = tree.levels[level]
    domains = []
    for domain in range(first, last):
        start, end = int(index.node_start[domain]), int(index.node_start[domain + 1])
        children: list[TopologyDomainModel] = []
        if index.child_start is not None:
            children = _domains(
                tree,
                gpus,
                level + 1,
                int(index.child_start[domain]),
                int(index.child_start[domain + 1]),
            )
        domains.append(
            TopologyDomainModel(
                name=index.name(domain),
                level=index.label,
                value=index.paths[domain][-1],
                nodes=end - start,
                gpus=_in_gpus(gpus.total[start:end]),
                gpus_used=_in_gpus(gpus.used[start:end]),
                gpus_free=_in_gpus(gpus.free[start:end]),
                children=children,
            )
        )
    return domains


# --- teams ---------------------------------------------------------------------------------
def team_models(service: Service) -> list[TeamModel]:
    policy = service.store.policy()
    if policy is None:
        return []
    tree = service.tree()
    running = holding(service)
    book = QuotaBook(policy, capacity_by_flavor(tree, INSTANCE_TYPE_LABEL), usage_by_team(running))
    phases = service.store.count_jobs_by_team_and_phase([team.name for team in policy.teams])
    stored = service.store.fair_share_usage() if kept_half_life_s(policy) > 0 else {}
    usage = estimated_usage(policy, tree, running, stored, service.clock())
    return [_team_model(team, book, phases, usage) for team in policy.teams]


def _team_model(
    team: TeamSpec,
    book: QuotaBook,
    phases: Mapping[tuple[str, JobPhase], int],
    usage: Mapping[TeamName, float],
) -> TeamModel:
    flavors = [quota.flavor for quota in team.quotas]
    flavors += sorted(f for f in book.usage.get(team.name, {}) if f not in flavors)
    return TeamModel(
        name=team.name,
        active=team.active,
        sharing=team.sharing.value,
        fair_share_weight=team.fair_share_weight,
        cohort=list(team.cohort),
        flavors=[_flavor_model(team, flavor, book) for flavor in flavors],
        jobs={phase: count for (name, phase), count in phases.items() if name == team.name},
        fair_share_usage=usage.get(team.name, 0.0),
        fair_share_position=_position(book, team.name, usage),
    )


def _position(book: QuotaBook, team: TeamName, usage: Mapping[TeamName, float]) -> float | None:
    """The team's fair-share position (None: not shared fairly, or last by a weight of 0)."""
    if book.policy.idle_allocation is not IdleAllocation.FAIR_SHARE:
        return None
    position = fair_share_position(book, team, usage)
    return None if math.isinf(position) else position


def _flavor_model(team: TeamSpec, flavor: FlavorName, book: QuotaBook) -> TeamFlavorModel:
    quota = team.quota_for(flavor)
    guarantee = book.guarantee(team.name, flavor)
    used = book.used(team.name, flavor)
    borrowed = book.borrowed(team.name, flavor)
    lent = book.lent(team.name, flavor)
    return TeamFlavorModel(
        flavor=flavor,
        guarantee=amounts(guarantee),
        used=amounts(used),
        borrowed=amounts(borrowed),
        lent=amounts(lent),
        borrow_limit=amounts(quota.borrow_limit if quota is not None else Resources()),
        guarantee_gpus=guarantee.amount(NVIDIA_GPU),
        used_gpus=gpu_number(gpus_held(used)),
        borrowed_gpus=gpu_number(gpus_held(borrowed)),
        lent_gpus=gpu_number(gpus_held(lent)),
    )
