"""The events a usage report needs: a window's phase changes and, asked for, the admission of
every job that held GPUs when the window began — so that a holding that began before the
window counts in it even with no event inside it. Checked through ``core.usage``'s arithmetic,
on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tests.store.test_sql_store import submit
from topoq.core.cycle import Snapshot, schedule
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import build_tree
from topoq.core.usage import UsageReport, usage_report
from topoq.domain.job import JobId, JobPhase
from topoq.store import SqlStore
from topoq.testing.governance import gpu_cluster, policy, team

HOUR = 3600.0
START, END = 10 * HOUR, 12 * HOUR
"""The report's window: two hours."""


def admit_pending(store: SqlStore, now: float) -> set[JobId]:
    """One cycle, as the controller runs it; the admitted jobs start at once."""
    nodes, topology = gpu_cluster([1, 2, 2])  # 4 nodes × 8 GPUs
    store.save_nodes(nodes, actor="topoq", now=now)
    jobs, current = store.jobs(), store.policy()
    assert current is not None
    result = schedule(Snapshot(now, build_tree(nodes, topology), tuple(jobs.values()), current))
    after = apply_cycle(jobs, result, now=now, start_at_once=True)
    store.save_jobs([v for i, v in after.items() if v != jobs[i]], now=now, decisions=result)
    return {admission.job for admission in result.admissions}


def finish(store: SqlStore, job_id: str, now: float) -> None:
    done = advance(store.job(JobId(job_id)), JobPhase.SUCCEEDED, now=now, cause="exited 0")
    store.save_jobs([done], now=now)


def report(store: SqlStore, team_name: str | None = None) -> UsageReport:
    events = store.job_events_between(START, END, team=team_name, holding_at_start=True)
    return usage_report(events, START, END, open_until_s=END)


def gpu_hours_per_job(usage: UsageReport) -> dict[str, float]:
    return {job.job: round(job.gpu_hours, 6) for job in usage.jobs}


@pytest.fixture
def history(store: SqlStore) -> SqlStore:
    """Admitted at 1 h: ``through`` (ends at 13 h, after the window), ``running`` (runs on),
    ``before`` (ends at 2 h) and ``vision-through`` (ends at 13 h); ``inside`` is submitted
    at 10.5 h and admitted at 11 h. No job of the first four has an event in the window."""
    store.save_policy(policy(team("llm", 32), team("vision", 32)), actor="admin", now=0.0)
    for name in ("through", "running", "before"):
        submit(store, name, "llm", at=0.5 * HOUR)
    submit(store, "vision-through", "vision", at=0.5 * HOUR)
    assert admit_pending(store, now=HOUR) == {"through", "running", "before", "vision-through"}
    finish(store, "before", now=2 * HOUR)
    submit(store, "inside", "llm", at=10.5 * HOUR)
    assert admit_pending(store, now=11 * HOUR) == {"inside"}
    finish(store, "through", now=13 * HOUR)
    finish(store, "vision-through", now=13 * HOUR)
    return store


def test_a_job_holding_gpus_through_the_window_counts_the_whole_window(history: SqlStore) -> None:
    hours = gpu_hours_per_job(report(history))
    assert hours == {
        "through": 8 * 2.0,  # admitted before, ended after: no event in the window
        "running": 8 * 2.0,  # admitted before, still running
        "vision-through": 8 * 2.0,
        "inside": 8 * 1.0,  # admitted in the window: from its admission
    }
    assert "before" not in hours, "it ended before the window"


def test_the_admissions_come_first_and_only_for_jobs_that_held_gpus_at_the_start(
    history: SqlStore,
) -> None:
    events = history.job_events_between(START, END, holding_at_start=True)
    held = [event for event in events if event.at_s < START]
    assert sorted(event.job for event in held) == ["running", "through", "vision-through"]
    assert all(event.phase is JobPhase.ADMITTED and event.allocation for event in held)
    assert events[: len(held)] == held
    assert [event.at_s for event in events] == sorted(event.at_s for event in events)


def test_a_team_report_carries_only_that_teams_holdings(history: SqlStore) -> None:
    assert gpu_hours_per_job(report(history, "vision")) == {"vision-through": 16.0}
    assert set(gpu_hours_per_job(report(history, "llm"))) == {"through", "running", "inside"}


def test_without_asking_only_the_windows_own_events_are_given(history: SqlStore) -> None:
    events = history.job_events_between(START, END)
    assert [(event.job, event.phase) for event in events] == [
        ("inside", JobPhase.PENDING),
        ("inside", JobPhase.ADMITTED),
        ("inside", JobPhase.RUNNING),
    ]


def test_a_holding_that_ends_at_the_windows_start_counts_nothing(store: SqlStore) -> None:
    store.save_policy(policy(team("llm", 32)), actor="admin", now=0.0)
    submit(store, "edge", "llm", at=0.5 * HOUR)
    admit_pending(store, now=HOUR)
    finish(store, "edge", now=START)
    assert gpu_hours_per_job(report(store)) == {}
