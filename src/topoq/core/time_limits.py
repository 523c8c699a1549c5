"""Time limits: how long a job may run (its own limit, else its priority class's), when a
running job is due to end by it, and which running jobs are past it.

A job that runs past its limit is stopped and fails with ``TIME_LIMIT_REACHED`` (no retry):
the controller and the simulator both ask :func:`overdue` at every step. The ends the limits
promise are also what expected start times and backfill are computed from
(:mod:`topoq.core.backfill`, :mod:`topoq.core.eta`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topoq.core.lifecycle import advance
from topoq.domain.durations import format_duration
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import FailureReason, JobId, JobPhase, JobView


def time_limit_of(policy: ClusterPolicy, job: JobView) -> float | None:
    """The job's time limit in seconds: its own, else its priority class's; None: unlimited."""
    if job.spec.time_limit_s is not None:
        return job.spec.time_limit_s
    return policy.class_time_limit_s(job.spec.priority_class)


def end_by_limit(policy: ClusterPolicy, job: JobView, now: float) -> float | None:
    """When a job holding capacity ends at the latest (its start, or ``now`` when admitted
    and not started yet, plus its limit); None when it has no limit."""
    limit = time_limit_of(policy, job)
    if limit is None:
        return None
    started = job.started_at if job.started_at is not None else max(now, job.admitted_at or now)
    return started + limit


@dataclass(frozen=True)
class TimeLimitReached:
    """A running job past its time limit: to be stopped and failed."""

    job: JobId
    cause: str
    """The history entry of its move to FAILED (starts with ``TIME_LIMIT_REACHED``)."""


def running_deadline(policy: ClusterPolicy, job: JobView) -> float | None:
    """When a running job reaches its time limit (its start plus its limit); None for a job
    not running or without a limit."""
    limit = time_limit_of(policy, job)
    if job.phase is not JobPhase.RUNNING or limit is None or job.started_at is None:
        return None
    return job.started_at + limit


def overdue(jobs: Iterable[JobView], now: float, policy: ClusterPolicy) -> list[TimeLimitReached]:
    """The running jobs whose start plus time limit is at or before ``now``."""
    reached = []
    for job in jobs:
        deadline = running_deadline(policy, job)
        if deadline is not None and deadline <= now:
            limit = time_limit_of(policy, job)
            assert limit is not None  # a deadline comes from a limit
            reached.append(TimeLimitReached(job.id, time_limit_cause(limit)))
    return reached


def failed_by_limit(job: JobView, now: float, policy: ClusterPolicy) -> JobView | None:
    """The job failed with ``TIME_LIMIT_REACHED`` when it runs past its limit at ``now``;
    None when it does not (any more)."""
    reached = overdue([job], now, policy)
    if not reached:
        return None
    return advance(job, JobPhase.FAILED, now=now, cause=reached[0].cause)


def time_limit_cause(limit_s: float) -> str:
    return (
        f"{FailureReason.TIME_LIMIT_REACHED.value}: ran past its time limit of "
        f"{format_duration(limit_s)}; stopped"
    )
