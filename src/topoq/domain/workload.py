"""What a user asks to place: a workload of pod sets with requests and topology constraints."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType

from topoq.domain.errors import InvalidRequestError
from topoq.domain.gpu_share import check_pod_gpu_ask, gpu_number, gpus_held
from topoq.domain.launch import check_image
from topoq.domain.node import Taint
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources

MAX_SLICE_LAYERS = 3


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


@dataclass(frozen=True)
class Toleration:
    """A Kubernetes toleration. ``key=None`` with ``Exists`` tolerates every taint."""

    key: str | None = None
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: str | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect.value:
            return False
        if self.key is None:
            return self.operator is TolerationOperator.EXISTS
        if self.key != taint.key:
            return False
        return self.operator is TolerationOperator.EXISTS or self.value == taint.value


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True)
class SelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case SelectorOperator.IN:
                return value is not None and value in self.values
            case SelectorOperator.NOT_IN:
                return value is None or value not in self.values
            case SelectorOperator.EXISTS:
                return value is not None
            case SelectorOperator.DOES_NOT_EXIST:
                return value is None
            case SelectorOperator.GT | SelectorOperator.LT:
                return _compare_integer(
                    value, self.values, greater=self.operator is SelectorOperator.GT
                )


def _compare_integer(value: str | None, values: tuple[str, ...], *, greater: bool) -> bool:
    if value is None or len(values) != 1:
        return False
    try:
        left, right = int(value), int(values[0])
    except ValueError:
        return False
    return left > right if greater else left < right


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements that must all hold (terms of a required node affinity are OR-ed)."""

    requirements: tuple[SelectorRequirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


@dataclass(frozen=True)
class SliceConstraint:
    """Each group of ``size`` consecutive pods sits in one domain of ``level``."""

    level: str
    size: int


@dataclass(frozen=True)
class SpreadConstraint:
    """At most ``max_pods_per_domain`` pods of the pod set in any one domain of ``level``."""

    level: str
    max_pods_per_domain: int


@dataclass(frozen=True)
class TopologyRequest:
    """Where the pods of a pod set may go. With neither level set the pod set is unconstrained."""

    required: str | None = None
    preferred: str | None = None
    slices: tuple[SliceConstraint, ...] = ()
    group: str | None = None
    spread: SpreadConstraint | None = None

    @property
    def unconstrained(self) -> bool:
        return self.required is None and self.preferred is None

    @property
    def named_levels(self) -> tuple[str, ...]:
        """Every topology level the request names (each must be a level of the cluster)."""
        named = [self.required, self.preferred, *(layer.level for layer in self.slices)]
        if self.spread is not None:
            named.append(self.spread.level)
        return tuple(level for level in named if level is not None)


@dataclass(frozen=True)
class PodSetSpec:
    name: str
    count: int
    requests: Resources = field(default_factory=Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology: TopologyRequest = field(default_factory=TopologyRequest)
    command: tuple[str, ...] = ()
    """What every pod runs (argv); empty means the executor's default workload."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Variables set in every pod of the pod set."""
    image: str | None = None
    """The container image the pods run; None: the executor's default. An executor that runs
    no containers (the local one) runs the command on its host and ignores it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_selector", MappingProxyType(dict(self.node_selector)))
        object.__setattr__(self, "environment", MappingProxyType(dict(self.environment)))
        where = f"pod set {self.name!r}"
        if not self.name:
            raise InvalidRequestError("a pod set has no name", hint="give every pod set a name")
        if self.count < 1:
            raise InvalidRequestError(
                f"count is {self.count}", where=where, hint="count must be >= 1"
            )
        _check_slices(self.topology.slices, self.count, where)
        check_pod_gpu_ask(self.requests, where)
        spread = self.topology.spread
        if spread is not None and spread.max_pods_per_domain < 1:
            raise InvalidRequestError(
                f"spread allows {spread.max_pods_per_domain} pods per domain",
                where=where,
                hint="max pods per domain must be >= 1",
            )
        if self.image is not None:
            check_image(self.image, where=f"{where}, image")

    def __hash__(self) -> int:
        return hash((self.name, self.count, self.requests, self.topology))


def _check_slices(slices: tuple[SliceConstraint, ...], count: int, where: str) -> None:
    if len(slices) > MAX_SLICE_LAYERS:
        raise InvalidRequestError(
            f"{len(slices)} slice layers requested",
            where=where,
            hint=f"use at most {MAX_SLICE_LAYERS}, outermost first",
        )
    outer_size, outer_name = count, "the pod count"
    for layer in slices:
        if layer.size < 1:
            raise InvalidRequestError(
                f"slice size {layer.size} at {layer.level}",
                where=where,
                hint="slice sizes must be >= 1",
            )
        if outer_size % layer.size:
            raise InvalidRequestError(
                f"slice size {layer.size} does not divide {outer_name} ({outer_size})",
                where=where,
                hint="choose a slice size that divides it, or change the count",
            )
        outer_size, outer_name = layer.size, f"the slice size above ({layer.size})"


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    pod_sets: tuple[PodSetSpec, ...]
    namespace: str = "default"
    queue: str | None = None
    priority_class: str | None = None
    time_limit_s: float | None = None
    """The time limit the document asks for, in seconds (topoq's ``timeLimit``)."""

    def __post_init__(self) -> None:
        if not self.pod_sets:
            raise InvalidRequestError(
                "the workload has no pod sets",
                where=f"workload {self.name!r}",
                hint="add at least one pod set with a count",
            )
        names = [pod_set.name for pod_set in self.pod_sets]
        duplicates = sorted(name for name, times in Counter(names).items() if times > 1)
        if duplicates:
            raise InvalidRequestError(
                f"pod set names repeat: {', '.join(duplicates)}",
                where=f"workload {self.name!r}",
                hint="give each pod set a distinct name",
            )

    @property
    def total_pods(self) -> int:
        return sum(pod_set.count for pod_set in self.pod_sets)

    @property
    def gpus(self) -> int | float:
        """The GPUs it asks for in all: whole ones plus shares of one (three pods of 0.5:
        1.5), a whole number when whole."""
        return gpu_number(gpus_held(self.total_requests))

    @cached_property
    def total_requests(self) -> Resources:
        """The requests summed over every pod (pod slots excluded). Computed once: the
        scheduling cycle asks for it several times per pending job."""
        totals: dict[str, int] = {}
        for pod_set in self.pod_sets:
            count = pod_set.count
            for name, value in pod_set.requests.items():
                if name != PODS:
                    totals[name] = totals.get(name, 0) + value * count
        return Resources(totals)
