"""Every phase change goes through ``advance``, checked against ``TRANSITIONS``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from topoq.domain.decisions import CycleResult, Requeue, RequeueCause
from topoq.domain.errors import TopoqError
from topoq.domain.job import TRANSITIONS, Allocation, JobId, JobPhase, JobView, PhaseChange


class IllegalTransition(TopoqError):
    """A move the transition table does not allow, e.g. a finished job starting again."""


def advance(
    job: JobView,
    to: JobPhase,
    *,
    now: float,
    cause: str,
    allocation: Allocation | None = None,
    preempted_for: JobId | None = None,
) -> JobView:
    """``job`` moved to phase ``to`` at ``now`` with its history extended.

    Moving to ADMITTED records the allocation; leaving the capacity-holding phases releases
    it; PREEMPTING counts the preemption, keeps the allocation (the victim holds its nodes
    until its pods are gone) and records ``preempted_for``, which leaving PREEMPTING clears.
    The shell counts failures (``JobView.failures``) when it sends a failed job with retries
    left back to PENDING.
    """
    if to not in TRANSITIONS[job.phase]:
        raise IllegalTransition(
            f"job {job.id}: cannot go from {job.phase.value} to {to.value} ({cause})"
        )
    changed = replace(
        job,
        phase=to,
        history=(*job.history, PhaseChange(now, to, cause)),
        preempted_for=preempted_for if to is JobPhase.PREEMPTING else None,
    )
    if to is JobPhase.ADMITTED:
        return replace(changed, allocation=allocation, admitted_at=now)
    if to is JobPhase.RUNNING:
        return replace(changed, started_at=now)
    if to is JobPhase.PREEMPTING:
        return replace(changed, preemptions=job.preemptions + 1)
    if not to.holds_capacity:
        return replace(changed, allocation=None)
    return changed


VICTIM_STOPPED = "requeued after preemption: its pods stopped"


def attempt_failed(job: JobView, at: float, cause: str) -> JobView:
    """Back to the queue with one more failure counted while ``max_retry`` allows, else
    failed; either way its capacity is freed."""
    if job.failures < job.spec.max_retry:
        retried = advance(
            job,
            JobPhase.PENDING,
            now=at,
            cause=f"{cause}; retry {job.failures + 1} of {job.spec.max_retry}",
        )
        return replace(retried, failures=job.failures + 1)
    return advance(job, JobPhase.FAILED, now=at, cause=cause)


def requeued(job: JobView, requeue: Requeue, now: float) -> JobView:
    """Back to PENDING for a cycle's ``requeue``."""
    cause = f"{requeue.cause.value}: {requeue.message}"
    if requeue.cause is RequeueCause.NODE_FAILED:
        return lost_a_node(job, now, cause)
    return advance(job, JobPhase.PENDING, now=now, cause=cause)


def lost_a_node(job: JobView, now: float, cause: str) -> JobView:
    """Back to PENDING after a node under it failed, remembering the nodes it held
    (``previous_nodes``) so that placement prefers them when it restarts."""
    pending = advance(job, JobPhase.PENDING, now=now, cause=cause)
    if job.allocation is None:
        return pending
    return replace(pending, previous_nodes=job.allocation.nodes)


def apply_cycle(
    jobs: Mapping[JobId, JobView],
    result: CycleResult,
    *,
    now: float,
    start_at_once: bool = False,
    evict_at_once: bool = False,
) -> dict[JobId, JobView]:
    """The jobs after a cycle's decisions (``cycle_moves`` over the others unchanged).
    ``start_at_once`` (an executor that starts a gang the moment it is admitted) and
    ``evict_at_once`` (victims stop at once and requeue) are for tests of the cycle alone; a
    real executor reports those moves as events."""
    moved = cycle_moves(jobs, result, now=now)
    if evict_at_once:
        for preempt in result.preemptions:
            victim = moved[preempt.victim]
            moved[preempt.victim] = advance(victim, JobPhase.PENDING, now=now, cause=VICTIM_STOPPED)
    if start_at_once:
        for admit in result.admissions:
            moved[admit.job] = advance(moved[admit.job], JobPhase.RUNNING, now=now, cause="started")
    return {**jobs, **moved}


def cycle_moves(
    jobs: Mapping[JobId, JobView], result: CycleResult, *, now: float
) -> dict[JobId, JobView]:
    """Only the jobs a cycle's decisions move, after their moves (each differs from its
    ``jobs`` entry: a move extends the history), so that a shell's work on them follows the
    decisions, not the length of the queue. Victims are PREEMPTING (for their preemptor)
    until the executor reports them stopped."""
    moved: dict[JobId, JobView] = {}

    def current(job_id: JobId) -> JobView:
        return moved[job_id] if job_id in moved else jobs[job_id]

    for requeue in result.requeues:
        moved[requeue.job] = requeued(current(requeue.job), requeue, now)
    for cancel in result.cancellations:
        moved[cancel.job] = advance(
            current(cancel.job), JobPhase.CANCELLED, now=now, cause=cancel.message
        )
    for preempt in result.preemptions:
        moved[preempt.victim] = advance(
            current(preempt.victim),
            JobPhase.PREEMPTING,
            now=now,
            cause=preempt.message,
            preempted_for=preempt.for_job,
        )
    for admit in result.admissions:
        moved[admit.job] = advance(
            current(admit.job),
            JobPhase.ADMITTED,
            now=now,
            cause="admitted",
            allocation=admit.allocation,
        )
    return moved
