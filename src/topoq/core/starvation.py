"""The starvation guard: a job that has waited longer than ``starvation_guard_s`` since it
last entered the queue (its submission, or its last requeue) is *starving*. Before it
considers any job, a cycle holds what starving jobs need (see :mod:`topoq.core.backfill`):
nodes expected to free earliest, and quota against other teams' borrowing when they may
borrow. ``starvation_guard_s = 0`` turns the guard off."""

from __future__ import annotations

from collections.abc import Iterable

from topoq.core.time_limits import next_time_limit
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobPhase, JobView


def waiting_since(job: JobView) -> float:
    """When the job last entered the queue: its last move to PENDING, else its submission."""
    for change in reversed(job.history):
        if change.phase is JobPhase.PENDING:
            return change.at_s
    return job.spec.submitted_at


def is_starving(policy: ClusterPolicy, job: JobView, now: float) -> bool:
    guard = policy.starvation_guard_s
    return guard > 0 and job.phase is JobPhase.PENDING and now - waiting_since(job) >= guard


def next_time_rule_change(
    jobs: Iterable[JobView], now: float, policy: ClusterPolicy
) -> float | None:
    """The earliest instant after ``now`` at which a rule that time enters changes an answer:
    a running job reaches its time limit, or a waiting job passes the starvation guard. Until
    then a cycle on unchanged inputs decides what the last one did."""
    jobs = tuple(jobs)
    instants = [next_time_limit(jobs, now, policy)]
    guard = policy.starvation_guard_s
    if guard > 0:
        instants += [
            waiting_since(job) + guard
            for job in jobs
            if job.phase is JobPhase.PENDING and waiting_since(job) + guard > now
        ]
    return min((at for at in instants if at is not None), default=None)
