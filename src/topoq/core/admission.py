"""What trying to admit one job is made of: the flavors it may use (its team's first), its
workload restricted to each, the outcome per flavor (``Attempt``: a quota verdict, then a
placement on the capacity the cycle has left — tried by ``cycle.state``), what an admission
books, quota held for a waiting queue head, and whether a job could ever run."""

from __future__ import annotations

import math
import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace

from topoq.core.holdings import flavor_values, resources_taken, total_demand
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.quota import QuotaBook, QuotaCheck
from topoq.core.tree import TopologyTree
from topoq.domain.flavors import DEFAULT_FLAVOR
from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE, gpus_text
from topoq.domain.job import Allocation, JobId, JobView
from topoq.domain.lint import accelerators_first, readable_amount
from topoq.domain.placement import PlacementReason, PlacementResult, PodSetDiagnosis
from topoq.domain.quantity import NVIDIA_GPU, PODS
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


def allocation_of(
    book: QuotaBook,
    job: JobView,
    flavor: FlavorName,
    demand: Resources,
    ledger: CapacityLedger,
    result: PlacementResult,
    after: CapacityLedger,
) -> Allocation:
    """What admitting ``job`` with placement ``result`` (``after``: the ledger with it
    charged) books: its nodes' resources, its quota, and how much of it is borrowed."""
    borrowed = _borrowed_after(book, job, flavor, demand)
    return Allocation(
        placement=result,
        resources_on_node=resources_taken(ledger, after, result),
        usage={flavor: demand},
        borrowed={flavor: borrowed} if borrowed else {},
    )


def _borrowed_after(
    book: QuotaBook, job: JobView, flavor: FlavorName, demand: Resources
) -> Resources:
    trial = book.copy()
    trial.charge(job.team, flavor, demand)
    grown = trial.borrowed(job.team, flavor) - book.borrowed(job.team, flavor)
    if GPU_SHARE not in grown:
        return grown
    # 1.5 borrowed before and 2 after is 0.5 more: one GPU less half a GPU, told as the half
    milli = grown.amount(NVIDIA_GPU) * GPU_MILLI_PER_GPU + grown.amount(GPU_SHARE)
    whole, share = divmod(milli, GPU_MILLI_PER_GPU)
    return Resources(dict(grown) | {NVIDIA_GPU: whole, GPU_SHARE: share})


@dataclass(frozen=True)
class QuotaHold:
    """Quota set aside for a team's waiting queue head: against the team's own later jobs,
    and, once it starves waiting for quota it may borrow (``across_teams``), against every
    other team's borrowing. ``expected_start``: when enough running work ends by its time
    limits for the head to pass the check (None: unknown); see ``topoq.core.backfill``."""

    job: JobId
    team: TeamName
    flavor: FlavorName
    demand: Resources
    across_teams: bool = False
    expected_start: float | None = field(default=None, compare=False)

    def binds(self, job: JobView) -> bool:
        """Whether the hold keeps its quota from ``job``."""
        return job.id != self.job and (job.team == self.team or self.across_teams)

    def applied_to(self, book: QuotaBook) -> QuotaBook:
        """The books as the team's later jobs must see them: with the head's demand taken."""
        held = book.copy()
        held.charge(self.team, self.flavor, self.demand)
        return held


def could_ever_run(book: QuotaBook, tree: TopologyTree, job: JobView, attempt: Attempt) -> bool:
    """Whether the job fits its team's guarantee plus borrow limit and the topology of an
    empty cluster; a job that never could must not hold anything for itself."""
    if book.policy.by_team.get(job.team) is None:
        return False
    return never_fits(book, tree, job, attempt.flavor, attempt.workload) is None


@dataclass(frozen=True)
class NeverFits:
    """Why a job can never be admitted in one flavor as the cluster and the policy stand: the
    limit, named with its numbers, and what would lift it."""

    flavor: FlavorName
    message: str
    numbers: Mapping[str, int | str]
    remedies: tuple[str, ...]
    about: str
    """What sets the limit: ``team`` (its quota) or ``pod set 'name'`` (its topology)."""


def never_admissible(
    book: QuotaBook, tree: TopologyTree, job: JobView, flavor_label: str
) -> list[NeverFits] | None:
    """None when some flavor could admit the job once enough is free, else why each flavor
    never could (empty when no flavor matches the job's node selectors)."""
    values = flavor_values(tree, flavor_label)
    reasons = []
    for flavor in flavors_for(job, book):
        workload = in_flavor(job.spec.workload, flavor, values, flavor_label)
        if workload is None:
            continue
        reason = never_fits(book, tree, job, flavor, workload)
        if reason is None:
            return None
        reasons.append(reason)
    return reasons


def never_fits(
    book: QuotaBook, tree: TopologyTree, job: JobView, flavor: FlavorName, workload: WorkloadSpec
) -> NeverFits | None:
    """None when the job could be admitted in ``flavor`` once enough is free: its demand
    within the team's guarantee plus its borrow limit (for the resources the flavor's quotas
    cover) and ``workload`` (the job's, restricted to the flavor) placeable on ``tree`` with
    every node free. An unknown team has no limit here (``UNKNOWN_TEAM`` says why it waits)."""
    ceiling_key = ("over-ceiling", job.team, flavor, total_demand(job))
    if ceiling_key in book.memo:  # the policy's limits: shared by the team's jobs of a size
        over_quota = book.memo[ceiling_key]
    else:
        over_quota = book.memo[ceiling_key] = _over_ceiling(book, job, flavor)
    if isinstance(over_quota, NeverFits):
        return over_quota
    key = ("never-fits", flavor, workload_shape(workload))
    known = tree.memo(key)
    if known is None:
        known = _empty_cluster_verdict(tree, workload)
        tree.remember(key, known)
    if not isinstance(known, tuple):
        return None
    index, diagnosis = known
    name = workload.pod_sets[index].name
    return NeverFits(
        flavor,
        f"it never fits in {flavor} even with every node free: pod set {name}: {diagnosis.message}",
        dict(diagnosis.numbers) | {"flavor": str(flavor)},
        tuple(r for r in diagnosis.relaxations if not r.startswith("wait"))
        or ("add nodes, or ask for fewer or smaller pods",),
        f"pod set {name!r}",
    )


def _milli_if_gpu(name: str, amount: int, share: int = 0) -> int:
    """A GPU amount in thousandths (with ``share`` thousandths more); any other as it is."""
    return amount * GPU_MILLI_PER_GPU + share if name == NVIDIA_GPU else amount


def _over_ceiling(book: QuotaBook, job: JobView, flavor: FlavorName) -> NeverFits | None:
    team = book.policy.by_team.get(job.team)
    if team is None:
        return None
    quota = team.quota_for(flavor)
    guarantee = quota.guarantee if quota is not None else Resources()
    may_borrow = quota.borrow_limit if quota is not None and team.sharing.borrows else Resources()
    asked_in_all = total_demand(job)
    demand = book.covered(flavor, asked_in_all)
    share = asked_in_all.amount(GPU_SHARE) if NVIDIA_GPU in book.terms(flavor).column else 0
    most = guarantee + may_borrow
    over = [
        name
        for name in accelerators_first({*demand, *([NVIDIA_GPU] if share else [])})
        if _milli_if_gpu(name, demand.amount(name), share) > _milli_if_gpu(name, most.amount(name))
    ]
    if not over:
        return None
    name = over[0]
    asked, has, extra = demand.amount(name), guarantee.amount(name), may_borrow.amount(name)
    requested: int | str = asked
    needed = asked  # what a remedy asks for, whole
    if name == NVIDIA_GPU and share:  # shares count as their parts of one GPU: told as 3.5
        requested = gpus_text(asked, share)
        needed = asked + math.ceil(share / GPU_MILLI_PER_GPU)
    asked_text = (
        f"{requested} {name}" if isinstance(requested, str) else readable_amount(name, asked)
    )
    ceiling = readable_amount(name, has + extra)
    limit = (
        f"a guarantee of {readable_amount(name, has)} and a borrow limit of "
        f"{readable_amount(name, extra)}"
        if team.sharing.borrows
        else f"a guarantee of {readable_amount(name, has)} and may not borrow"
    )
    return NeverFits(
        flavor,
        f"team {team.name} may use at most {ceiling} of {flavor} ({limit}); the job asks for "
        f"{asked_text}",
        {
            "flavor": str(flavor),
            "resource": name,
            "requested": requested,
            "guarantee": has,
            "borrow_limit": extra,
            "most_the_team_may_use": has + extra,
        },
        (
            f"ask an admin to raise {team.name}'s borrow limit on {flavor} to "
            f"{readable_amount(name, needed - has)}"
            if team.sharing.borrows
            else f"ask an admin to raise {team.name}'s guarantee on {flavor} to "
            f"{readable_amount(name, needed)} or let it borrow",
            f"reduce the job to {readable_amount(name, has + extra)}",
        ),
        "team",
    )


def _empty_cluster_verdict(
    tree: TopologyTree, workload: WorkloadSpec
) -> tuple[int, PodSetDiagnosis] | bool:
    """True when the workload places on ``tree`` with every node free, else the failing pod
    set's index and why."""
    result = place_workload(CapacityLedger.empty_cluster(tree), workload)[0]
    if result.admitted:
        return True
    for index, outcome in enumerate(result.pod_sets):
        diagnosis = outcome.diagnosis
        if diagnosis is not None and diagnosis.reason is not PlacementReason.GANG_INCOMPLETE:
            return index, diagnosis
    raise RuntimeError(f"workload {workload.name} was refused without a reason")


def workload_shape(workload: WorkloadSpec) -> Shape:
    """What decides where a workload can go, without its names: one ``Shape`` object for
    equal shapes while any is in use, so that keys holding one compare it by identity."""
    parts = tuple(
        (
            ps.count,
            ps.requests,
            tuple(sorted(ps.node_selector.items())),
            ps.affinity_terms,
            ps.tolerations,
            ps.topology,
        )
        for ps in workload.pod_sets
    )
    shape = _SHAPES.get(parts)
    if shape is None:
        shape = _SHAPES[parts] = Shape(parts)
    return shape


class Shape:
    """A workload's shape (``workload_shape``) as a key: equal shapes are equal, and its hash
    is worked out once — the cycle looks up answers by shape (and by classes that hold one)
    hundreds of thousands of times, and hashing the parts walks every pod set's requests,
    selectors, affinities and topology."""

    __slots__ = ("__weakref__", "_demand", "_hash", "parts")

    def __init__(self, parts: tuple[Hashable, ...]) -> None:
        self.parts = parts
        self._hash = hash(parts)
        self._demand: tuple[tuple[str, int], ...] | None = None

    @property
    def demand(self) -> tuple[tuple[str, int], ...]:
        """The requests summed over every pod, pod slots excluded, as sorted items without
        zeros (``WorkloadSpec.total_requests.items()`` of a workload of this shape): worked
        out once per shape, not once per job."""
        if self._demand is None:
            totals: dict[str, int] = {}
            for part in self.parts:
                count, requests = part[0], part[1]  # type: ignore[index]
                assert isinstance(count, int) and isinstance(requests, Resources)
                for name, value in requests.items():
                    if name != PODS:
                        totals[name] = totals.get(name, 0) + value * count
            self._demand = tuple(Resources(totals).items())
        return self._demand

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Shape) and self._hash == other._hash and self.parts == other.parts
        )

    def __repr__(self) -> str:
        return f"Shape{self.parts!r}"

    def __reduce__(self) -> tuple[type[Shape], tuple[tuple[Hashable, ...]]]:
        return (Shape, (self.parts,))  # the hash is worked out again where it is unpickled


_SHAPES: weakref.WeakValueDictionary[tuple[Hashable, ...], Shape] = weakref.WeakValueDictionary()
"""The shapes in use, one object each (``workload_shape``)."""
