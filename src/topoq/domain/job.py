"""Jobs: what was submitted (``JobSpec``), where a job stands (``JobView``), and the table of
legal phase moves that every change goes through."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import NewType

from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.phases import (
    FINISHED_PHASES,
    HOLDING_PHASES,
    DependencyKind,
    DependencyStatus,
    JobPhase,
)
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec

__all__ = [  # the phase words live in domain.phases; importers keep reading them here
    "FINISHED_PHASES",
    "HOLDING_PHASES",
    "DependencyKind",
    "DependencyStatus",
    "JobPhase",
]

JobId = NewType("JobId", str)


class FailureReason(StrEnum):
    """Why an attempt of a job failed without a pod's exit code to say it; the history entry
    of the move starts with it (``START_FAILED: <the executor's message>``)."""

    START_FAILED = "START_FAILED"
    """The executor could not start the gang (a bad environment, a work directory that cannot
    be written, ...); none of its pods runs and its capacity is freed."""
    TIME_LIMIT_REACHED = "TIME_LIMIT_REACHED"
    """The job ran past its time limit (its own, else its priority class's): it was stopped
    and failed, without a retry."""


@dataclass(frozen=True)
class PhaseMove:
    source: JobPhase
    target: JobPhase
    why: str


P = JobPhase
PHASE_MOVES: tuple[PhaseMove, ...] = (
    PhaseMove(P.PENDING, P.ADMITTED, "a cycle found quota and a placement"),
    PhaseMove(P.PENDING, P.CANCELLED, "the user cancelled it, or a dependency can never hold"),
    PhaseMove(P.ADMITTED, P.RUNNING, "the executor started every pod of the gang"),
    PhaseMove(
        P.ADMITTED,
        P.PREEMPTING,
        "evicted before it started (reclaim, priority, fair share); it keeps its nodes while "
        "the executor stops it",
    ),
    PhaseMove(
        P.ADMITTED,
        P.PENDING,
        "a node it was placed on failed before it started, the executor could not start it "
        "(START_FAILED) and a retry is left (max_retry), or the control plane restarted and "
        "its pods did not survive",
    ),
    PhaseMove(
        P.ADMITTED, P.FAILED, "the executor could not start it (START_FAILED), no retry left"
    ),
    PhaseMove(P.ADMITTED, P.CANCELLED, "the user cancelled it"),
    PhaseMove(P.RUNNING, P.SUCCEEDED, "every pod exited 0"),
    PhaseMove(
        P.RUNNING,
        P.FAILED,
        "a pod failed and no retry is left (max_retry), or it ran past its time limit "
        "(TIME_LIMIT_REACHED)",
    ),
    PhaseMove(
        P.RUNNING,
        P.PENDING,
        "a pod failed with retries left, a node of the gang failed, or the control plane "
        "restarted and a pod of the gang was lost while it was down (gangs whose pods all "
        "survived are adopted and stay running)",
    ),
    PhaseMove(
        P.RUNNING,
        P.PREEMPTING,
        "evicted for reclaim, priority or fair share; the executor stops its pods (SIGTERM, "
        "then SIGKILL after the policy's grace period) while it keeps its nodes",
    ),
    PhaseMove(P.RUNNING, P.CANCELLED, "the user cancelled it"),
    PhaseMove(
        P.PREEMPTING,
        P.PENDING,
        "its pods are gone: the executor reported them stopped (STOPPED), they exited by "
        "themselves while stopping (any exit code: a trainer that checkpoints on SIGTERM and "
        "exits 0 is resumed, not finished), a node of the gang failed, the grace period "
        "passed and the controller had them killed, or the control plane restarted and its "
        "pods were lost meanwhile (pods that survived are adopted and asked to stop again); "
        "back in the queue with the cause recorded",
    ),
    PhaseMove(P.PREEMPTING, P.CANCELLED, "the user cancelled it while it was being evicted"),
)
"""Every legal phase move with the reason it exists; ``docs/state-machines.md`` is generated
from this table (``render_state_machine``)."""

TRANSITIONS: Mapping[JobPhase, frozenset[JobPhase]] = MappingProxyType(
    {
        phase: frozenset(move.target for move in PHASE_MOVES if move.source is phase)
        for phase in JobPhase
    }
)


def render_state_machine() -> str:
    """The job state machine as Markdown: a Mermaid diagram and the table of moves."""
    lines = [
        "# Job state machine",
        "",
        "Generated from `topoq.domain.job.PHASE_MOVES` by `render_state_machine()`; a test keeps",
        "this file and the table in step. Every move goes through `topoq.core.lifecycle.advance`,",
        "which rejects any other move and appends the move and its cause to the job's history.",
        "",
        "```mermaid",
        "stateDiagram-v2",
        "    [*] --> pending",
        *(f"    {m.source.value} --> {m.target.value}" for m in PHASE_MOVES),
        *(f"    {phase.value} --> [*]" for phase in JobPhase if phase.finished),
        "```",
        "",
        "| from | to | when |",
        "|---|---|---|",
        *(f"| {m.source.value} | {m.target.value} | {m.why} |" for m in PHASE_MOVES),
        "",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Dependency:
    kind: DependencyKind
    job: JobId


@dataclass(frozen=True)
class SourceObject:
    """The object outside topoq that a job stands for, when one does: a Kubernetes Job that
    topoq took in from the cluster (its executor runs the gang by starting that object), or a
    group of plain Pods (kind ``PodGroup``, named after the group; ``manifests`` are its pods
    in rank order, as JSON, so that a later attempt can make them again)."""

    kind: str
    namespace: str
    name: str
    uid: str
    manifests: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class JobSpec:
    """A submitted job. ``runtime_s`` is how long it runs once started (simulation only);
    ``time_limit_s`` is how long it may run before it is stopped (None: its priority class's
    default, else unlimited)."""

    id: JobId
    team: TeamName
    workload: WorkloadSpec
    submitted_at: float
    priority_class: str | None = None
    dependencies: tuple[Dependency, ...] = ()
    max_retry: int = 0
    user: str | None = None
    runtime_s: float | None = None
    time_limit_s: float | None = None
    source: SourceObject | None = None
    """The cluster object the job was taken in from (None: submitted to topoq)."""


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

    @cached_property
    def nodes(self) -> frozenset[str]:
        """The nodes it holds capacity on (worked out once: an allocation never changes)."""
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
    preempted_for: JobId | None = None
    """While PREEMPTING: the job it is evicted for (the cycle keeps the room for that one)."""
    previous_nodes: frozenset[str] = frozenset()
    """The nodes it held when it was last requeued for a node failure (placement prefers
    them: a restart keeps its domains where they still have room); empty otherwise."""

    @cached_property
    def id(self) -> JobId:  # cached: the cycle asks it millions of times
        return self.spec.id

    @cached_property
    def team(self) -> TeamName:
        return self.spec.team

    @cached_property
    def entered_queue_at(self) -> float:
        """When the job last entered the queue: its last move to PENDING, else its
        submission (cached: the starvation guard asks it of every waiting job every step)."""
        for change in reversed(self.history):
            if change.phase is JobPhase.PENDING:
                return change.at_s
        return self.spec.submitted_at

    @property
    def attempt(self) -> int:
        """How many times the job has been admitted: the number of its current (or last)
        attempt, as the executor counts them."""
        return sum(1 for change in self.history if change.phase is JobPhase.ADMITTED)

    @property
    def preempting_since(self) -> float | None:
        """When a PREEMPTING job was evicted (its grace period runs from then); else None."""
        if self.phase is not JobPhase.PREEMPTING:
            return None
        return next(c.at_s for c in reversed(self.history) if c.phase is JobPhase.PREEMPTING)
