"""What the store returns beyond the domain's own objects: stored state (``XRecord``) and
rows of its append-only logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topoq.domain.job import Allocation, JobId, JobPhase, JobView


@dataclass(frozen=True)
class JobRecord:
    """A job as stored: the view, plus the row's version for optimistic concurrency (pass it
    back in ``save_jobs(expected_versions=...)``), the executor's attempt number and when the
    row last changed."""

    view: JobView
    version: int
    attempt: int
    updated_at: float


MAX_WINDOW_JOBS = 200_000
"""The most jobs a what-if replays from one window (``topoq whatif``, ``GET
/reports/history``): a week of a busy cluster holds far fewer."""


@dataclass(frozen=True)
class JobEvent:
    """One entry of a job's phase history. ``allocation`` is set on ``admitted`` events: what
    the admission booked (usage reports integrate it until the next event of the job)."""

    job: JobId
    team: str
    seq: int
    at_s: float
    phase: JobPhase
    cause: str
    allocation: Allocation | None = None


class DecisionKind(StrEnum):
    ADMIT = "admit"
    PREEMPT = "preempt"
    REQUEUE = "requeue"
    CANCEL = "cancel"
    DIAGNOSTIC = "diagnostic"
    """A job's pending reason changed (recorded only when it changes, not every cycle)."""


@dataclass(frozen=True)
class DecisionRecord:
    """One decision of a numbered cycle; ``detail`` is the decision as JSON (see
    ``topoq.store.policy_codec`` to decode it)."""

    cycle: int
    at_s: float
    kind: DecisionKind
    job: JobId
    detail: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyVersion:
    version: int
    actor: str
    at_s: float


@dataclass(frozen=True)
class TokenRecord:
    """An API token without its secret (only a hash of it is stored)."""

    id: str
    name: str
    role: str
    teams: tuple[str, ...]
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None
