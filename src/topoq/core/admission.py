"""Trying to admit one job: for each flavor it can use, the quota check, then placement on the
capacity the cycle has left. Returns the admission, or what stood in the way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from topoq.core.holdings import resources_taken, total_demand
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.quota import QuotaBook, QuotaCheck, QuotaVerdict
from topoq.core.tree import TopologyTree
from topoq.domain.flavors import DEFAULT_FLAVOR
from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.job import Allocation, JobId, JobView
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.domain.workload import PodSetSpec, WorkloadSpec


@dataclass(frozen=True)
class Attempt:
    """The outcome for one flavor: a quota verdict and, if quota allowed, a placement."""

    flavor: FlavorName
    quota: QuotaCheck
    workload: WorkloadSpec
    """The job's workload restricted to this flavor."""
    placement: PlacementResult | None = None
    allocation: Allocation | None = None
    ledger: CapacityLedger | None = None
    """The capacity left after this admission (set when admitted)."""


def flavors_for(job: JobView, book: QuotaBook) -> list[FlavorName]:
    """The team's quota flavors first (by name), then the others the cluster has."""
    team = book.policy.by_team.get(job.team)
    own = sorted(q.flavor for q in team.quotas if q.flavor in book.capacity) if team else []
    return own + sorted(flavor for flavor in book.capacity if flavor not in own)


def in_flavor(
    workload: WorkloadSpec,
    flavor: FlavorName,
    values: Mapping[FlavorName, tuple[str, ...]],
    label: str,
) -> WorkloadSpec | None:
    """The workload with every pod set restricted to nodes of ``flavor``; None when a pod set
    selects another flavor."""
    if len(values) <= 1 or flavor == DEFAULT_FLAVOR or flavor not in values:
        return workload
    raw = values[flavor]
    pod_sets: list[PodSetSpec] = []
    for pod_set in workload.pod_sets:
        chosen = pod_set.node_selector.get(label)
        if chosen is not None and chosen not in raw:
            return None
        if chosen is None and len(raw) == 1:
            selector = dict(pod_set.node_selector) | {label: raw[0]}
            pod_sets.append(replace(pod_set, node_selector=selector))
        else:
            pod_sets.append(pod_set)
    return replace(workload, pod_sets=tuple(pod_sets))


def try_flavor(
    job: JobView,
    flavor: FlavorName,
    book: QuotaBook,
    ledger: CapacityLedger,
    workload: WorkloadSpec,
) -> Attempt:
    demand = total_demand(job)
    check = book.check(job.team, flavor, demand)
    if not check.verdict.admissible:
        return Attempt(flavor, check, workload)
    result, after = place_workload(ledger, workload, previous_nodes=job.previous_nodes)
    if not result.admitted:
        return Attempt(flavor, check, workload, result)
    borrowed = _borrowed_after(book, job, flavor, demand)
    allocation = Allocation(
        placement=result,
        resources_on_node=resources_taken(ledger, after),
        usage={flavor: demand},
        borrowed={flavor: borrowed} if borrowed else {},
    )
    return Attempt(flavor, check, workload, result, allocation, after)


def _borrowed_after(
    book: QuotaBook, job: JobView, flavor: FlavorName, demand: Resources
) -> Resources:
    trial = book.copy()
    trial.charge(job.team, flavor, demand)
    return trial.borrowed(job.team, flavor) - book.borrowed(job.team, flavor)


def would_be_within_guarantee(attempts: list[Attempt]) -> bool:
    return any(a.quota.verdict is QuotaVerdict.WITHIN_GUARANTEE for a in attempts)


@dataclass(frozen=True)
class QuotaHold:
    """Quota set aside for a team's waiting queue head."""

    job: JobId
    team: TeamName
    flavor: FlavorName
    demand: Resources

    def applied_to(self, book: QuotaBook) -> QuotaBook:
        """The books as the team's later jobs must see them: with the head's demand taken."""
        held = book.copy()
        held.charge(self.team, self.flavor, self.demand)
        return held


def could_ever_run(book: QuotaBook, tree: TopologyTree, job: JobView, attempt: Attempt) -> bool:
    """Whether the job fits its team's guarantee plus borrow limit and the topology of an
    empty cluster; a job that never could must not hold anything for itself."""
    team = book.policy.by_team.get(job.team)
    if team is None:
        return False
    quota = team.quota_for(attempt.flavor)
    ceiling = quota.guarantee if quota is not None else Resources()
    if quota is not None and team.sharing.borrows:
        ceiling = ceiling + quota.borrow_limit
    if not book.covered(attempt.flavor, total_demand(job)).fits_in(ceiling):
        return False
    return place_workload(CapacityLedger.empty_cluster(tree), attempt.workload)[0].admitted
