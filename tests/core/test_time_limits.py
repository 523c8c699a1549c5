"""Time limits: a job's own limit, else its priority class's; overdue running jobs fail with
TIME_LIMIT_REACHED; the next instant a time-based rule changes is known."""

from __future__ import annotations

from dataclasses import replace

from topoq.core.lifecycle import advance
from topoq.core.starvation import next_time_rule_change
from topoq.core.time_limits import failed_by_limit, overdue, time_limit_of
from topoq.domain.governance import ClusterPolicy, PriorityClass
from topoq.domain.job import JobPhase, JobView
from topoq.testing.governance import job

CLASSES = ClusterPolicy(
    priority_classes=(PriorityClass("batch", 10, 3600.0), PriorityClass("serve", 50)),
    default_priority_class="batch",
    starvation_guard_s=0,
)


def running(view: JobView, at: float) -> JobView:
    admitted = advance(view, JobPhase.ADMITTED, now=at, cause="admitted")
    return advance(admitted, JobPhase.RUNNING, now=at, cause="started")


def test_the_job_limit_wins_over_the_class_default_and_the_default_class_applies() -> None:
    assert time_limit_of(CLASSES, job("own", "a", time_limit=60, priority="batch")) == 60
    assert time_limit_of(CLASSES, job("cls", "a", priority="batch")) == 3600
    assert time_limit_of(CLASSES, job("dflt", "a")) == 3600  # the default class's
    assert time_limit_of(CLASSES, job("none", "a", priority="serve")) is None


def test_a_running_job_is_overdue_exactly_at_start_plus_limit() -> None:
    long = running(job("long", "a", time_limit=10), at=100)
    assert overdue([long], 109.9, CLASSES) == []
    reached = overdue([long], 110, CLASSES)
    assert [r.job for r in reached] == ["long"]
    assert reached[0].cause.startswith("TIME_LIMIT_REACHED")


def test_a_pending_or_unlimited_job_is_never_overdue() -> None:
    pending = job("wait", "a", time_limit=1)
    unlimited = running(job("free", "a", priority="serve"), at=0)
    assert overdue([pending, unlimited], 10**6, CLASSES) == []


def test_an_overdue_job_fails_without_retry_even_with_retries_left() -> None:
    long = running(replace(job("long", "a", time_limit=5, max_retry=3)), at=0)
    failed = failed_by_limit(long, 5, CLASSES)
    assert failed is not None and failed.phase is JobPhase.FAILED
    assert failed.history[-1].cause == "TIME_LIMIT_REACHED: ran past its time limit of 5s; stopped"
    assert failed.allocation is None
    assert failed_by_limit(long, 4, CLASSES) is None


def test_the_next_change_is_the_earliest_limit_or_guard_expiry() -> None:
    guarded = replace(CLASSES, starvation_guard_s=600)
    jobs = [running(job("r", "a", time_limit=100), at=0), job("w", "a", at=50)]
    assert next_time_rule_change(jobs, 10, guarded) == 100
    assert next_time_rule_change(jobs, 100, guarded) == 650  # the limit is due, not after
    assert next_time_rule_change(jobs, 700, guarded) is None
    assert next_time_rule_change(jobs, 10, CLASSES) == 100  # no guard
    # a job requeued at 300 waits again from then: its guard passes at 900, not at 650
    requeued = advance(running(job("q", "a", at=50), at=60), JobPhase.PENDING, now=300, cause="x")
    assert requeued.entered_queue_at == 300
    assert next_time_rule_change([requeued], 100, guarded) == 900
    assert next_time_rule_change([requeued, *jobs], 660, guarded) == 900
