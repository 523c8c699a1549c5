"""A cluster node as the scheduler sees it: labels, taints, health and allocatable resources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NewType

from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import GPU_SHARING_LABEL, is_derived_gpu_resource
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources

NodeName = NewType("NodeName", str)

HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
DEFAULT_MAX_PODS = 110  # the kubelet's default --max-pods, used when a node does not say


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"

    @property
    def blocks_scheduling(self) -> bool:
        return self is not TaintEffect.PREFER_NO_SCHEDULE


@dataclass(frozen=True)
class Taint:
    key: str
    effect: TaintEffect
    value: str = ""


@dataclass(frozen=True)
class NodeSpec:
    """One node. ``allocatable`` always carries a ``pods`` slot count."""

    name: NodeName
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Resources = field(default_factory=Resources)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInputError("a node has an empty name", hint="every node needs a name")
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        derived = sorted(name for name in self.allocatable if is_derived_gpu_resource(name))
        if derived:
            raise InvalidInputError(
                f"{derived[0]} is derived by the scheduler, not reported by a node",
                where=f"node {self.name}",
                hint=f"report whole GPUs as nvidia.com/gpu; label the node "
                f'{GPU_SHARING_LABEL}: "true" to open its GPUs to shares',
            )
        if PODS not in self.allocatable:
            with_pods = dict(self.allocatable) | {PODS: DEFAULT_MAX_PODS}
            object.__setattr__(self, "allocatable", Resources(with_pods))

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable

    @property
    def hostname(self) -> str:
        return self.labels.get(HOSTNAME_LABEL, self.name)

    def __hash__(self) -> int:
        return hash(self.name)
