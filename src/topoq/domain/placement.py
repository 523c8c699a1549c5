"""The outcome of a placement query: where every pod goes, or why the workload does not fit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class PlacementReason(StrEnum):
    """Why a pod set was not placed. Paired with a human message and the numbers behind it."""

    TOPOLOGY_UNSATISFIABLE = "TOPOLOGY_UNSATISFIABLE"
    """Enough capacity exists, but no single domain of the requested level holds the pods."""
    INSUFFICIENT_CAPACITY = "INSUFFICIENT_CAPACITY"
    """Not enough free capacity on the eligible nodes of the whole topology."""
    NO_ELIGIBLE_NODES = "NO_ELIGIBLE_NODES"
    """Selectors, affinity or untolerated taints exclude every node of the topology."""
    GROUP_UNSATISFIABLE = "GROUP_UNSATISFIABLE"
    """Each member fits alone, but no single domain holds the whole pod-set group."""
    GANG_INCOMPLETE = "GANG_INCOMPLETE"
    """This pod set would fit, but another pod set of the workload does not (all or nothing)."""


class ExclusionCause(StrEnum):
    """Why a node cannot take even one pod of a pod set."""

    NOT_IN_TOPOLOGY = "not_in_topology"
    TAINT_NOT_TOLERATED = "taint_not_tolerated"
    SELECTOR_MISMATCH = "selector_mismatch"
    NO_FREE_POD_SLOT = "no_free_pod_slot"

    @staticmethod
    def too_little(resource: str) -> str:
        return f"too_little_free_{resource}"


@dataclass(frozen=True)
class DomainAssignment:
    """``count`` consecutive pods, ranks from ``first_rank``, in one leaf of the topology.

    ``node`` is the node's name when leaves are hosts, ``None`` when the leaf pools several nodes.
    ``domain`` maps every level's node label to this leaf's value, highest level first.
    """

    node: str | None
    domain: Mapping[str, str]
    count: int
    first_rank: int
    gpu_devices: tuple[tuple[int, ...], ...] = ()
    """Per pod (in rank order), the GPU devices of ``node`` it takes, where the node keeps its
    devices one by one (open to GPU shares); empty elsewhere (any free GPUs of the node)."""


@dataclass(frozen=True)
class PodSetDiagnosis:
    reason: PlacementReason
    message: str
    numbers: Mapping[str, int | str] = field(default_factory=dict)
    excluded_nodes: Mapping[str, int] = field(default_factory=dict)
    relaxations: tuple[str, ...] = ()
    """Changes that would make the pod set fit now, smallest first."""


@dataclass(frozen=True)
class PodSetOutcome:
    name: str
    count: int
    assignments: tuple[DomainAssignment, ...] = ()
    diagnosis: PodSetDiagnosis | None = None
    span: Mapping[str, int] = field(default_factory=dict)
    """How many distinct domains of each level the assigned pods use."""
    best_span: Mapping[str, int] = field(default_factory=dict)
    """Per level, the fewest domains the free capacity of that moment allowed the pods
    (``placement.workload.fewest_domains``; each level on its own): beside ``span``, how
    close the placement came. Empty when not known (a pod set placed in a group, or an
    allocation from before it was recorded)."""

    @property
    def assigned(self) -> bool:
        return self.diagnosis is None


@dataclass(frozen=True)
class PlacementResult:
    workload: str
    pod_sets: tuple[PodSetOutcome, ...]

    @property
    def admitted(self) -> bool:
        return all(outcome.assigned for outcome in self.pod_sets)


def placement_best_span(placement: PlacementResult) -> dict[str, int]:
    """Per level, the fewest domains the free capacity allowed the whole gang, as far as its
    pod sets' ``best_span`` tell (the most any of them needs: a lower bound); empty when a
    pod set's is not known."""
    known = [outcome.best_span for outcome in placement.pod_sets]
    if not known or not all(known):
        return {}
    return {label: max(best.get(label, 0) for best in known) for label in known[0]}


def placement_span(placement: PlacementResult) -> dict[str, int]:
    """How many distinct domains of each level the whole gang uses (what ``topoq list`` shows
    as SPAN), keyed by the level's node label, highest level first."""
    paths = [
        tuple(assignment.domain.items())
        for outcome in placement.pod_sets
        for assignment in outcome.assignments
    ]
    depth = max((len(path) for path in paths), default=0)
    span: dict[str, int] = {}
    for level in range(depth):
        prefixes = {path[: level + 1] for path in paths if len(path) > level}
        label = next(path[level][0] for path in paths if len(path) > level)
        span[label] = len(prefixes)
    return span
