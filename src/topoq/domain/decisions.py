"""What one scheduling cycle decides, as data: admissions, preemptions, requeues,
cancellations, and a diagnostic for every job left pending."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topoq.domain.job import Allocation, JobId


class PendingReason(StrEnum):
    WAITING_FOR_QUOTA = "WAITING_FOR_QUOTA"
    """The team's guarantee is in use and it may not borrow (or the flavor has no quota)."""
    BORROW_LIMIT_REACHED = "BORROW_LIMIT_REACHED"
    NO_LENDER_HAS_ROOM = "NO_LENDER_HAS_ROOM"
    TOPOLOGY_UNSATISFIABLE = "TOPOLOGY_UNSATISFIABLE"
    WAITING_FOR_VICTIMS = "WAITING_FOR_VICTIMS"
    """Preemptions were issued for this job; it is admitted once the victims have stopped."""
    WAITING_ON_DEPENDENCY = "WAITING_ON_DEPENDENCY"
    HELD = "HELD"
    BLOCKED_BY_QUEUE_HEAD = "BLOCKED_BY_QUEUE_HEAD"
    """The team queues strict-fifo and an earlier job of the team is waiting."""
    RESERVED_FOR_LARGER_GANG = "RESERVED_FOR_LARGER_GANG"
    """It would fit only in capacity held for a larger gang that waits longer."""
    UNKNOWN_TEAM = "UNKNOWN_TEAM"
    NEVER_FITS_CURRENT_POLICY = "NEVER_FITS_CURRENT_POLICY"
    """Not even an empty cluster would admit it as the cluster and the policy stand now: more
    than its team's guarantee plus borrow limit, or more than any domain its topology allows
    (a policy change or a node added or back in service may change that)."""


class PreemptionCause(StrEnum):
    PREEMPTED_FOR_PRIORITY = "PREEMPTED_FOR_PRIORITY"
    """A higher-priority job of the same team needed the capacity."""
    PREEMPTED_FOR_RECLAIM = "PREEMPTED_FOR_RECLAIM"
    """The job ran on borrowed capacity and its owner asked for it back."""
    PREEMPTED_FOR_FAIR_SHARE = "PREEMPTED_FOR_FAIR_SHARE"
    """Its team was above its weighted fair share and another team below it needed room."""


class RequeueCause(StrEnum):
    NODE_FAILED = "NODE_FAILED"


@dataclass(frozen=True)
class Admit:
    job: JobId
    allocation: Allocation


@dataclass(frozen=True)
class Preempt:
    victim: JobId
    for_job: JobId
    cause: PreemptionCause
    message: str


@dataclass(frozen=True)
class Requeue:
    job: JobId
    cause: RequeueCause
    message: str


@dataclass(frozen=True)
class Cancel:
    job: JobId
    message: str


@dataclass(frozen=True)
class Diagnostic:
    job: JobId
    reason: PendingReason
    message: str
    numbers: Mapping[str, int | str] = field(default_factory=dict)
    remedies: tuple[str, ...] = ()
    """What would change it, e.g. a relaxation of the topology request."""


@dataclass(frozen=True)
class CycleResult:
    admissions: tuple[Admit, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    requeues: tuple[Requeue, ...] = ()
    cancellations: tuple[Cancel, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
