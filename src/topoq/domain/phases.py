"""A job's phase and its dependencies' kinds and standing: the words every layer and the wire
speak, in a module of their own that imports nothing, so that a CLI verb reading an answer
does not load the job model (``topoq.domain.job`` re-exports them)."""

from __future__ import annotations

from enum import StrEnum


class JobPhase(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTING = "preempting"
    """Evicted by a cycle and being stopped: it keeps its nodes (and the cycle keeps its quota
    promised to the job it is evicted for) until the executor reports its pods gone."""
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in FINISHED_PHASES

    @property
    def holds_capacity(self) -> bool:
        return self in HOLDING_PHASES


FINISHED_PHASES = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})
HOLDING_PHASES = frozenset({JobPhase.ADMITTED, JobPhase.RUNNING, JobPhase.PREEMPTING})
"""The phases in which a job holds capacity (its nodes and its quota)."""


class DependencyKind(StrEnum):
    AFTER_OK = "after-ok"
    """Start only after the other job succeeded; cancelled if it fails or is cancelled."""
    AFTER_ANY = "after-any"
    """Start after the other job finished, however it ended."""
    AFTER_FAILED = "after-failed"
    """Start only after the other job failed; cancelled if it succeeds."""


class DependencyStatus(StrEnum):
    """Where a dependency stands, by its upstream job's phase (``core.dependencies``)."""

    OPEN = "open"
    """The upstream job has not finished yet: the dependent job waits."""
    MET = "met"
    """The upstream job ended as the kind asks: the dependent job may run."""
    BROKEN = "broken"
    """The upstream job ended otherwise, or no job has its id: the dependent job is cancelled."""
