"""The cluster on the wire: nodes, the topology with occupancy, teams and their quota, the
policy, events and the audit log."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from topoq.domain.phases import JobPhase
from topoq.wire.v1.base import GpuCount, ResourceAmounts, WireModel


class Health(WireModel):
    status: str
    version: str


class NodeHolderModel(WireModel):
    job: str
    team: str
    gpus: GpuCount
    ranks: list[str] = Field(
        default_factory=list,
        description="The job's pods on the node, as `podSet:rank`, in rank order (empty for "
        "other teams' jobs than the token's).",
    )
    stopping: bool = Field(
        default=False,
        description="The job's pods are being stopped (preempted, or its node drained): they "
        "keep their room until they are gone.",
    )


class NodeModel(WireModel):
    name: str
    ready: bool
    cordoned: bool
    labels: dict[str, str]
    allocatable: ResourceAmounts
    gpus: int
    gpus_used: GpuCount
    jobs: list[str] = Field(description="Jobs holding capacity on the node.")
    holders: list[NodeHolderModel] = Field(
        default_factory=list,
        description="Each of those jobs with its team and the GPUs it holds on the node.",
    )


class TopologyDomainModel(WireModel):
    name: str = Field(description="The label values from the top level down, joined by '/'.")
    level: str = Field(description="The node label of this level.")
    value: str
    nodes: int
    gpus: int
    gpus_used: GpuCount
    gpus_free: GpuCount = Field(description="Free GPUs on schedulable nodes.")
    children: list[TopologyDomainModel] = Field(default_factory=list)


class UnplacedNodeModel(WireModel):
    name: str
    reason: str
    detail: str


class TopologyModel(WireModel):
    name: str
    levels: list[str]
    gpus: int
    gpus_used: GpuCount
    gpus_free: GpuCount
    domains: list[TopologyDomainModel] = Field(description="The top level's domains.")
    outside: list[UnplacedNodeModel] = Field(
        description="Nodes outside the tree (a level label missing)."
    )


class TeamFlavorModel(WireModel):
    flavor: str
    guarantee: ResourceAmounts
    used: ResourceAmounts
    borrowed: ResourceAmounts
    lent: ResourceAmounts
    borrow_limit: ResourceAmounts
    guarantee_gpus: int
    used_gpus: GpuCount
    borrowed_gpus: GpuCount
    lent_gpus: GpuCount


class TeamModel(WireModel):
    name: str
    active: bool
    sharing: str
    fair_share_weight: int
    cohort: list[str]
    flavors: list[TeamFlavorModel]
    jobs: dict[JobPhase, int] = Field(description="Unfinished jobs by phase.")
    fair_share_usage: float = Field(
        default=0.0,
        description="Under fair share, the team's decayed usage of borrowed capacity: the "
        "decayed average of its borrowed share of the cluster (0 without history).",
    )
    fair_share_position: float | None = Field(
        default=None,
        description="Under fair share, the team's position: its weighted borrowed share now "
        "plus its decayed usage over its weight. Of teams of one priority that wait to "
        "borrow, the lowest position is served first. Null when idle compute is shared first "
        "come, first served, or when the team's weight is 0 (it is served last).",
    )


class LintFindingModel(WireModel):
    severity: str = Field(description="error or warning.")
    code: str
    message: str
    hint: str


class PolicyLintModel(WireModel):
    """What the policy lint finds in a policy on the cluster's nodes, nothing kept."""

    accepted: bool = Field(description="Whether `PUT /policy` would keep it (no lint error).")
    findings: list[LintFindingModel] = Field(description="Errors first, then warnings.")


class PolicyModel(WireModel):
    version: int | None = Field(description="Null while no policy was ever set.")
    document: dict[str, Any] = Field(description="The policy in topoq's policy-file format.")
    warnings: list[LintFindingModel] = Field(
        default_factory=list,
        exclude_if=lambda warnings: not warnings,
        description="When the policy was just set: the policy lint's warnings about it on the "
        "cluster's nodes (a lint error refuses it); left out when there are none.",
    )


class EventModel(WireModel):
    at: float
    job: str
    team: str
    phase: JobPhase
    cause: str


class AuditEntryModel(WireModel):
    at: float
    actor: str
    action: str
    target: str
    detail: dict[str, Any]


class NodeAction(WireModel):
    node: NodeModel
    requeued: list[str] = Field(default_factory=list, description="Jobs sent back to the queue.")


class PolicyVersionModel(WireModel):
    version: int
    actor: str
    at: float
