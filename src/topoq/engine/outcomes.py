"""What an executor's outcome does to a job: the job after an event (started, exited, node
lost, start failed, stopped), or None when the event no longer applies to it. Pure, and the
one place these rules live: the controller reads the job, asks here and writes the answer;
the simulator asks here about the runs it ends and the victims it stops."""

from __future__ import annotations

from topoq.core.lifecycle import VICTIM_STOPPED, advance, attempt_failed, lost_a_node
from topoq.domain.job import FailureReason, JobPhase, JobView
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind

MAX_MESSAGE_LENGTH = 500
"""Characters of an executor's error message kept in a job's history."""

GANG_ENDED = frozenset(
    {ExecutorEventKind.EXITED, ExecutorEventKind.NODE_LOST, ExecutorEventKind.STOPPED}
)
"""Events after which none of the gang's pods runs. Not START_FAILED: after a failed start the
controller stops whatever of the gang may have started, and tries again while that fails."""


def moved_by(job: JobView, event: ExecutorEvent) -> JobView | None:
    """The job after an executor event, or None when the event is stale: about another
    attempt, or the job is no longer in a phase the event can move (a user cancelled it, a
    node failure requeued it, ...). A stale event is dropped on purpose."""
    if event.attempt and event.attempt != job.attempt:
        return None
    at = event.at_s
    if job.phase is JobPhase.PREEMPTING:
        return _stopped(job, event)
    match event.kind:
        case ExecutorEventKind.STARTED if job.phase is JobPhase.ADMITTED:
            return advance(job, JobPhase.RUNNING, now=at, cause="started")
        case ExecutorEventKind.EXITED if job.phase.holds_capacity:
            if event.exit_code == 0:
                return advance(job, JobPhase.SUCCEEDED, now=at, cause="every pod exited 0")
            return attempt_failed(job, at, f"a pod exited {event.exit_code}")
        case ExecutorEventKind.START_FAILED if job.phase is JobPhase.ADMITTED:
            return attempt_failed(job, at, f"{FailureReason.START_FAILED.value}: {event.message}")
        case ExecutorEventKind.NODE_LOST if job.phase.holds_capacity:
            return lost_a_node(job, at, f"node {event.node} was lost; the gang is requeued")
    return None


def _stopped(job: JobView, event: ExecutorEvent) -> JobView | None:
    """A victim being stopped goes back to the queue once its pods are gone, however they
    went: stopped as asked, exited by themselves (any code: a trainer that checkpoints on
    SIGTERM and exits 0 is resumed later, not finished), lost with a node, or never
    started. The preemption was counted when it began."""
    at = event.at_s
    match event.kind:
        case ExecutorEventKind.STOPPED:
            return advance(job, JobPhase.PENDING, now=at, cause=VICTIM_STOPPED)
        case ExecutorEventKind.EXITED:
            cause = f"requeued after preemption: its pods exited ({event.exit_code}) while stopping"
            return advance(job, JobPhase.PENDING, now=at, cause=cause)
        case ExecutorEventKind.NODE_LOST:
            cause = f"requeued after preemption: node {event.node} was lost while it stopped"
            return advance(job, JobPhase.PENDING, now=at, cause=cause)
        case ExecutorEventKind.START_FAILED:
            cause = f"requeued after preemption: it never started ({event.message})"
            return advance(job, JobPhase.PENDING, now=at, cause=cause)
    return None  # STARTED of the attempt being stopped: it stops anyway


def error_message(error: BaseException) -> str:
    """One line for a job's history: the error's type and text, control characters (a NUL
    that PostgreSQL would refuse to store, line breaks) escaped, at most
    ``MAX_MESSAGE_LENGTH`` characters."""
    text = f"{type(error).__name__}: {error}"
    printable = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    if len(printable) > MAX_MESSAGE_LENGTH:
        return printable[: MAX_MESSAGE_LENGTH - 1] + "…"
    return printable
