"""The one table of what an executor's report does to a job (controller and simulator)."""

from __future__ import annotations

import pytest

from topoq.core.lifecycle import advance
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.outcomes import moved_by
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.testing.governance import job

Kind = ExecutorEventKind


def victim(max_retry: int = 0) -> JobView:
    view = job("v", "b", 1, max_retry=max_retry)
    view = advance(view, JobPhase.ADMITTED, now=1, cause="admitted")
    view = advance(view, JobPhase.RUNNING, now=2, cause="started")
    return advance(view, JobPhase.PREEMPTING, now=3, cause="reclaim", preempted_for=JobId("p"))


@pytest.mark.parametrize(
    ("event", "cause"),
    [
        (ExecutorEvent(Kind.STOPPED, 5, job=JobId("v")), "its pods stopped"),
        (ExecutorEvent(Kind.EXITED, 5, job=JobId("v"), exit_code=0), "exited (0) while stopping"),
        (ExecutorEvent(Kind.EXITED, 5, job=JobId("v"), exit_code=143), "exited (143)"),
        (ExecutorEvent(Kind.NODE_LOST, 5, job=JobId("v"), node="n1"), "node n1 was lost"),
        (ExecutorEvent(Kind.START_FAILED, 5, job=JobId("v"), message="x"), "never started"),
    ],
    ids=lambda value: value.kind.value if isinstance(value, ExecutorEvent) else "",
)
def test_a_victim_is_requeued_however_its_pods_went(event: ExecutorEvent, cause: str) -> None:
    moved = moved_by(victim(), event)
    assert moved is not None and moved.phase is JobPhase.PENDING
    assert moved.history[-1].cause.startswith("requeued after preemption")
    assert cause in moved.history[-1].cause
    assert moved.failures == 0 and moved.preemptions == 1 and moved.allocation is None


def test_a_started_report_of_a_victim_or_a_stop_of_another_attempt_changes_nothing() -> None:
    assert moved_by(victim(), ExecutorEvent(Kind.STARTED, 5, job=JobId("v"))) is None
    stale = ExecutorEvent(Kind.STOPPED, 5, job=JobId("v"), attempt=7)
    assert moved_by(victim(), stale) is None


def test_stopped_means_nothing_to_a_job_that_is_not_being_preempted() -> None:
    running = advance(job("r", "b", 1), JobPhase.ADMITTED, now=1, cause="admitted")
    assert moved_by(running, ExecutorEvent(Kind.STOPPED, 5, job=JobId("r"))) is None


def test_an_exit_outside_preemption_keeps_the_retry_rule() -> None:
    view = advance(job("f", "b", 1, max_retry=1), JobPhase.ADMITTED, now=1, cause="admitted")
    view = advance(view, JobPhase.RUNNING, now=2, cause="started")
    retried = moved_by(view, ExecutorEvent(Kind.EXITED, 5, job=JobId("f"), exit_code=3))
    assert retried is not None and retried.phase is JobPhase.PENDING and retried.failures == 1
    again = advance(retried, JobPhase.ADMITTED, now=6, cause="admitted")
    failed = moved_by(again, ExecutorEvent(Kind.START_FAILED, 7, job=JobId("f"), message="x"))
    assert failed is not None and failed.phase is JobPhase.FAILED
