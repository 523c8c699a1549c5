"""Changing the cluster's inventory on the wire: ``POST /cluster/apply`` and what it did."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from topoq.wire.v1.base import ResourceAmounts, WireModel
from topoq.wire.v1.cluster import LintFindingModel


class ClusterApplyRequest(WireModel):
    document: dict[str, Any] = Field(
        description="The cluster in topoq's cluster-file format (apiVersion topoq.io/v1, kind "
        "Cluster); `topoq cluster apply` converts any format `topoq place` reads. Its levels "
        "must be the server's."
    )
    drain: bool = Field(
        default=False,
        description="Requeue the gangs on the nodes it removes or shrinks below what they hold "
        "(as a drain does); without it such a change is refused (409).",
    )
    dry_run: bool = Field(default=False, description="Only answer what would change.")


class AddedNodeModel(WireModel):
    name: str
    labels: dict[str, str]
    allocatable: ResourceAmounts


class RemovedNodeModel(WireModel):
    name: str
    jobs: list[str] = Field(description="Gangs holding capacity on it (requeued).")


class ChangedNodeModel(WireModel):
    name: str
    changed: list[str] = Field(description="What changed: allocatable, labels, taints.")
    labels_before: dict[str, str]
    labels: dict[str, str]
    allocatable_before: ResourceAmounts
    allocatable: ResourceAmounts
    jobs: list[str] = Field(description="Gangs holding capacity on it.")
    short_of: list[str] = Field(
        description="Resources its gangs hold more of than it now has: those gangs are requeued."
    )


class ClusterApplyResult(WireModel):
    applied: bool = Field(description="False for a dry run, or when nothing changes.")
    dry_run: bool
    nodes: int = Field(description="Nodes in the inventory once applied.")
    added: list[AddedNodeModel]
    removed: list[RemovedNodeModel]
    changed: list[ChangedNodeModel]
    requeued: list[str] = Field(
        description="Gangs sent back to the queue (for a dry run: that would be, with drain)."
    )
    policy_findings: list[LintFindingModel] = Field(
        default_factory=list,
        description="The policy lint's findings (errors too) about the policy in force on the "
        "new inventory: the change is applied, but the policy may need one too.",
    )
