"""What a cycle may look at: ``Snapshot``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topoq.core.cycle.by_phase import JobsByPhase
from topoq.core.tree import TopologyTree
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL


class PlacementMode(StrEnum):
    """How a cycle places gangs. A server always places as topoq does; the simulator also
    replays the same arrivals under the two baselines an admin compares it with (ADR 0014)."""

    TOPOQ = "topoq"
    """Topology-aware placement, holds for blocked and starving gangs, topology-aware victim
    search."""
    KUEUE_LIKE = "kueue-like"
    """The same placement (the smallest domain that holds the gang, as Kueue's
    topology-aware scheduling), but nothing held for waiting jobs, victims searched over
    the whole cluster, as a scheduler without topology-aware preemption, and no packing by
    fragmentation (a share goes to the tightest device)."""
    FIRST_FIT = "first-fit"
    """Topology-oblivious: each pod on the first node with room, in an order that knows
    nothing of the topology (a fixed shuffle); nothing held, victims over the whole cluster."""


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
    placement: PlacementMode = PlacementMode.TOPOQ
    by_phase: JobsByPhase | None = field(default=None, compare=False, repr=False)
    """``jobs`` sorted out by phase, when the shell keeps them so (``PhaseIndex``): the cycle
    then takes these instead of sorting out every job. Must hold the very same jobs."""

    @property
    def holds_for_waiting(self) -> bool:
        """Whether waiting gangs hold quota and nodes (topoq's placement only)."""
        return self.placement is PlacementMode.TOPOQ

    @property
    def packs_by_fragmentation(self) -> bool:
        """Whether a one-pod pod set is packed by fragmentation on a cluster open to GPU
        shares (topoq's placement only: ``placement.packing``)."""
        return self.placement is PlacementMode.TOPOQ
