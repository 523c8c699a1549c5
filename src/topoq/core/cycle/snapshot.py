"""What a cycle may look at: ``Snapshot``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from topoq.core.tree import TopologyTree
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL


@dataclass(frozen=True)
class Snapshot:
    """Everything a cycle may look at. ``tree`` holds the schedulable nodes (rebuilt when the
    inventory or node health changes); time enters only as ``now``."""

    now: float
    tree: TopologyTree
    jobs: tuple[JobView, ...]
    policy: ClusterPolicy
    flavor_label: str = INSTANCE_TYPE_LABEL
    upstream_phases: Mapping[JobId, JobPhase] = field(default_factory=dict)
    """The phase of each job a pending job depends on that is not in ``jobs`` (a shell that
    holds only unfinished jobs gives the finished ones here; ``core.dependencies``)."""
    fair_share_usage: Mapping[TeamName, float] = field(default_factory=dict)
    """Each team's decayed usage of borrowed capacity as of ``now`` (``core.fair_share``):
    part of its fair-share position. Empty: no history, only what teams borrow now."""
