"""The starvation guard: a job that has waited longer than ``starvation_guard_s`` since it
last entered the queue (its submission, or its last requeue) is *starving*. Before it
considers any job, a cycle holds what starving jobs need (see :mod:`topoq.core.backfill`):
nodes expected to free earliest, and quota against other teams' borrowing when they may
borrow. ``starvation_guard_s = 0`` turns the guard off."""

from __future__ import annotations

from collections.abc import Iterable

from topoq.core.time_limits import time_limit_of
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobPhase, JobView


def waiting_since(job: JobView) -> float:
    """When the job last entered the queue: its last move to PENDING, else its submission."""
    return job.entered_queue_at


def is_starving(policy: ClusterPolicy, job: JobView, now: float) -> bool:
    guard = policy.starvation_guard_s
    return guard > 0 and job.phase is JobPhase.PENDING and now - waiting_since(job) >= guard


def next_time_rule_change(
    jobs: Iterable[JobView], now: float, policy: ClusterPolicy
) -> float | None:
    """The earliest instant after ``now`` at which a rule that time enters changes an answer:
    a running job reaches its time limit, or a waiting job passes the starvation guard. Until
    then a cycle on unchanged inputs decides what the last one did. One pass over ``jobs``
    (the shells ask it of every job after a step that changed none)."""
    guard = policy.starvation_guard_s
    pending, running = JobPhase.PENDING, JobPhase.RUNNING
    earliest: float | None = None
    for job in jobs:
        phase = job.phase
        if phase is pending:
            if guard <= 0:
                continue
            at = job.entered_queue_at + guard
        elif phase is running and job.started_at is not None:
            limit = time_limit_of(policy, job)
            if limit is None:
                continue
            at = job.started_at + limit
        else:
            continue
        if at > now and (earliest is None or at < earliest):
            earliest = at
    return earliest
