"""Jobs: what was submitted (``JobSpec``), where a job stands (``JobView``), and the table of
legal phase moves that every change goes through."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NewType

from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec

JobId = NewType("JobId", str)


class JobPhase(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in FINISHED_PHASES

    @property
    def holds_capacity(self) -> bool:
        return self in (JobPhase.ADMITTED, JobPhase.RUNNING)


FINISHED_PHASES = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})

TRANSITIONS: Mapping[JobPhase, frozenset[JobPhase]] = MappingProxyType(
    {
        JobPhase.PENDING: frozenset(
            {
                JobPhase.ADMITTED,  # a cycle found quota and a placement
                JobPhase.CANCELLED,  # the user cancelled it, or an after-ok dependency failed
            }
        ),
        JobPhase.ADMITTED: frozenset(
            {
                JobPhase.RUNNING,  # the executor started every pod of the gang
                JobPhase.PREEMPTED,  # evicted before it started (reclaim, priority, fair share)
                JobPhase.PENDING,  # a node it was placed on failed before it started
                JobPhase.FAILED,  # the executor could not start it and no retry is left
                JobPhase.CANCELLED,  # the user cancelled it
            }
        ),
        JobPhase.RUNNING: frozenset(
            {
                JobPhase.SUCCEEDED,  # every pod exited 0
                JobPhase.FAILED,  # a pod failed and no retry is left (max_retry)
                JobPhase.PENDING,  # a pod failed with retries left, or a node of the gang failed
                JobPhase.PREEMPTED,  # evicted for reclaim, priority or fair share
                JobPhase.CANCELLED,  # the user cancelled it
            }
        ),
        JobPhase.PREEMPTED: frozenset(
            {
                JobPhase.PENDING,  # back in the queue with its cause recorded
                JobPhase.CANCELLED,  # the user cancelled it while it was being evicted
            }
        ),
        JobPhase.SUCCEEDED: frozenset(),
        JobPhase.FAILED: frozenset(),
        JobPhase.CANCELLED: frozenset(),
    }
)


class DependencyKind(StrEnum):
    AFTER_OK = "after-ok"
    """Start only after the other job succeeded; cancelled if it fails or is cancelled."""
    AFTER_ANY = "after-any"
    """Start after the other job finished, however it ended."""
    AFTER_FAILED = "after-failed"
    """Start only after the other job failed; cancelled if it succeeds."""


@dataclass(frozen=True)
class Dependency:
    kind: DependencyKind
    job: JobId


@dataclass(frozen=True)
class JobSpec:
    """A submitted job. ``runtime_s`` is how long it runs once started (simulation only)."""

    id: JobId
    team: TeamName
    workload: WorkloadSpec
    submitted_at: float
    priority_class: str | None = None
    dependencies: tuple[Dependency, ...] = ()
    max_retry: int = 0
    user: str | None = None
    runtime_s: float | None = None


@dataclass(frozen=True)
class PhaseChange:
    at_s: float
    phase: JobPhase
    cause: str


@dataclass(frozen=True)
class Allocation:
    """What an admitted job holds: where its pods go, the resources it takes on each node,
    and the quota it uses per flavor."""

    placement: PlacementResult
    resources_on_node: Mapping[str, Resources]
    usage: Mapping[FlavorName, Resources]
    borrowed: Mapping[FlavorName, Resources] = field(default_factory=dict)
    """The part of ``usage`` above the team's guarantee when it was admitted."""

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(self.resources_on_node)


@dataclass(frozen=True)
class JobView:
    """A job as one scheduling cycle sees it."""

    spec: JobSpec
    phase: JobPhase = JobPhase.PENDING
    history: tuple[PhaseChange, ...] = ()
    allocation: Allocation | None = None
    admitted_at: float | None = None
    started_at: float | None = None
    failures: int = 0
    preemptions: int = 0
    held: bool = False

    @property
    def id(self) -> JobId:
        return self.spec.id

    @property
    def team(self) -> TeamName:
        return self.spec.team
