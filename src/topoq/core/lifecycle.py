"""Every phase change goes through ``advance``, checked against ``TRANSITIONS``."""

from __future__ import annotations

from dataclasses import replace

from topoq.domain.errors import TopoqError
from topoq.domain.job import TRANSITIONS, Allocation, JobPhase, JobView, PhaseChange


class IllegalTransition(TopoqError):
    """A move the transition table does not allow, e.g. a finished job starting again."""


def advance(
    job: JobView, to: JobPhase, *, now: float, cause: str, allocation: Allocation | None = None
) -> JobView:
    """``job`` moved to phase ``to`` at ``now`` with its history extended.

    Moving to ADMITTED records the allocation; leaving the admitted/running phases releases it.
    A failure with retries left goes back to PENDING and counts the failure.
    """
    if to not in TRANSITIONS[job.phase]:
        raise IllegalTransition(
            f"job {job.id}: cannot go from {job.phase.value} to {to.value} ({cause})"
        )
    changed = replace(job, phase=to, history=(*job.history, PhaseChange(now, to, cause)))
    if to is JobPhase.ADMITTED:
        return replace(changed, allocation=allocation, admitted_at=now)
    if to is JobPhase.RUNNING:
        return replace(changed, started_at=now)
    if to is JobPhase.PREEMPTED:
        return replace(changed, allocation=None, preemptions=job.preemptions + 1)
    if not to.holds_capacity:
        return replace(changed, allocation=None)
    return changed
