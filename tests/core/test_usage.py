"""Usage reports from phase events: hand-computed GPU-hours per team per UTC day and per job."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoq.core.usage import JobUsage, usage_report
from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import GPU_SHARE
from topoq.domain.job import Allocation, JobId, JobPhase
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources

P = JobPhase
H = 3600.0
DAY = 86400.0
MAY_1 = 1_714_521_600.0
"""2024-05-01 00:00 UTC."""
FLAVOR = "p5.48xlarge"


@dataclass(frozen=True)
class Event:
    job: JobId
    team: str
    seq: int
    at_s: float
    phase: JobPhase
    allocation: Allocation | None = None


def allocation(gpus: int, borrowed: int = 0) -> Allocation:
    def amounts(count: int) -> dict[str, Resources]:
        return {FLAVOR: Resources({NVIDIA_GPU: count})} if count else {}

    return Allocation(
        placement=PlacementResult(workload="job", pod_sets=()),
        resources_on_node={},
        usage=amounts(gpus),
        borrowed=amounts(borrowed),
    )


Step = tuple[float, JobPhase] | tuple[float, JobPhase, int, int]
"""(hours after May 1st midnight, phase[, GPUs, borrowed GPUs of an admission])."""


def history(job: str, *steps: Step, team: str = "nlp") -> list[Event]:
    """A job's events: submitted at the first step's time, then the steps in order."""
    events = [Event(JobId(job), team, 0, MAY_1 + steps[0][0] * H, P.PENDING)]
    for seq, step in enumerate(steps, start=1):
        booked = allocation(step[2], step[3]) if len(step) == 4 else None
        events.append(Event(JobId(job), team, seq, MAY_1 + step[0] * H, step[1], booked))
    return events


@dataclass(frozen=True)
class Case:
    name: str
    events: list[Event]
    window_h: tuple[float, float]
    days: list[tuple[str, str, float, float, int, int]]
    """(team, day, GPU-h in guarantee, GPU-h borrowed, jobs, preemptions)."""
    jobs: list[tuple[str, float, float, float, int]]
    """(job, GPU-h, borrowed GPU-h, wall time in hours, attempts)."""
    now_h: float | None = None


CASES = [
    Case(
        "a job inside the guarantee: 16 GPUs for 2 h",
        history("a", (1, P.ADMITTED, 16, 0), (1, P.RUNNING), (3, P.SUCCEEDED)),
        (0, 24),
        days=[("nlp", "2024-05-01", 32.0, 0.0, 1, 0)],
        jobs=[("a", 32.0, 0.0, 2.0, 1)],
    ),
    Case(
        "a borrowing job spanning midnight is split at 00:00 UTC (2 h + 3 h of 8 GPUs)",
        history("m", (22, P.ADMITTED, 8, 8), (22.1, P.RUNNING), (27, P.SUCCEEDED)),
        (0, 48),
        days=[("nlp", "2024-05-01", 0.0, 16.0, 1, 0), ("nlp", "2024-05-02", 0.0, 24.0, 1, 0)],
        jobs=[("m", 40.0, 40.0, 5.0, 1)],
    ),
    Case(
        "preempted then restarted: 1 h of 16 GPUs (8 borrowed), then 1.5 h of 16 in guarantee",
        history(
            "p",
            (1, P.ADMITTED, 16, 8),
            (1, P.RUNNING),
            (2, P.PREEMPTING),
            (2, P.PENDING),
            (4, P.ADMITTED, 16, 0),
            (4, P.RUNNING),
            (5.5, P.SUCCEEDED),
        ),
        (0, 24),
        days=[("nlp", "2024-05-01", 8.0 + 24.0, 8.0, 1, 1)],
        jobs=[("p", 40.0, 8.0, 2.5, 2)],
    ),
    Case(
        "the window cuts a holding on both sides (8 GPUs from 22:00 to 02:00, asked 23:00-01:00)",
        history("w", (-2, P.ADMITTED, 8, 0), (-2, P.RUNNING), (2, P.FAILED)),
        (-1, 1),
        days=[("nlp", "2024-04-30", 8.0, 0.0, 1, 0), ("nlp", "2024-05-01", 8.0, 0.0, 1, 0)],
        jobs=[("w", 16.0, 0.0, 2.0, 1)],
    ),
    Case(
        "a job still running counts up to now (4 GPUs from 20:00 to now 21:30)",
        history("r", (20, P.ADMITTED, 4, 0), (20, P.RUNNING)),
        (0, 24),
        days=[("nlp", "2024-05-01", 6.0, 0.0, 1, 0)],
        jobs=[("r", 6.0, 0.0, 1.5, 1)],
        now_h=21.5,
    ),
    Case(
        "a requeue after a node failure ends the holding but is no preemption; so does a cancel",
        history(
            "n",
            (1, P.ADMITTED, 8, 0),
            (1, P.RUNNING),
            (2, P.PENDING),
            (3, P.ADMITTED, 8, 0),
            (3.5, P.CANCELLED),
        ),
        (0, 24),
        days=[("nlp", "2024-05-01", 12.0, 0.0, 1, 0)],
        jobs=[("n", 12.0, 0.0, 1.5, 2)],
    ),
    Case(
        "teams are reported apart; a job that never held GPUs is not in the report",
        [
            *history("x", (1, P.ADMITTED, 8, 0), (1, P.RUNNING), (2, P.SUCCEEDED)),
            *history("y", (1, P.ADMITTED, 8, 0), (1, P.RUNNING), (3, P.SUCCEEDED)),
            *history(
                "v", (5, P.ADMITTED, 24, 16), (6, P.PREEMPTING), (6, P.PENDING), team="vision"
            ),
            *history("waiting", (1, P.CANCELLED)),
        ],
        (0, 24),
        days=[
            ("nlp", "2024-05-01", 24.0, 0.0, 2, 0),
            ("vision", "2024-05-01", 8.0, 16.0, 1, 1),
        ],
        jobs=[("x", 8.0, 0.0, 1.0, 1), ("y", 16.0, 0.0, 2.0, 1), ("v", 24.0, 16.0, 1.0, 1)],
    ),
    Case(
        "a holding that ended before the window, and one after it, count nowhere",
        [
            *history("before", (-5, P.ADMITTED, 8, 0), (-3, P.SUCCEEDED)),
            *history("after", (30, P.ADMITTED, 8, 0), (31, P.SUCCEEDED)),
        ],
        (0, 24),
        days=[],
        jobs=[],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_usage_per_team_per_day_and_per_job(case: Case) -> None:
    start_h, end_h = case.window_h
    now = None if case.now_h is None else MAY_1 + case.now_h * H
    report = usage_report(case.events, MAY_1 + start_h * H, MAY_1 + end_h * H, open_until_s=now)
    days = [
        (
            d.team,
            d.day.isoformat(),
            round(d.gpu_hours_in_guarantee, 9),
            round(d.gpu_hours_borrowed, 9),
            d.jobs,
            d.preemptions,
        )
        for d in report.days
    ]
    assert days == case.days
    jobs = [
        (
            j.job,
            round(j.gpu_hours, 9),
            round(j.gpu_hours_borrowed, 9),
            j.wall_time_s / H,
            j.attempts,
        )
        for j in report.jobs
    ]
    assert sorted(jobs) == sorted(case.jobs)


def test_shares_of_a_gpu_count_as_their_parts_of_one_gpu_hour() -> None:
    """Three pods of 0.5 GPU for 2 h, half a GPU of it borrowed (as the books count it)."""
    shares = Allocation(
        placement=PlacementResult(workload="job", pod_sets=()),
        resources_on_node={},
        usage={FLAVOR: Resources({GPU_SHARE: 1500})},
        borrowed={FLAVOR: Resources({GPU_SHARE: 500})},
    )
    events = history("a", (1, P.RUNNING), (3, P.SUCCEEDED))
    events[1] = replace(events[1], phase=P.ADMITTED, allocation=shares)
    report = usage_report(events, MAY_1, MAY_1 + DAY)
    (job,) = report.jobs
    assert (job.gpu_hours, job.gpu_hours_borrowed) == (3.0, 1.0)
    (day,) = report.days
    assert (day.gpu_hours_in_guarantee, day.gpu_hours_borrowed) == (2.0, 1.0)


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        usage_report([], MAY_1, MAY_1)


def test_days_are_utc_dates() -> None:
    report = usage_report(history("a", (23.5, P.ADMITTED, 8, 0)), MAY_1, MAY_1 + DAY)
    assert report.days[0].day == date(2024, 5, 1)
    assert report.days[0].gpu_hours == 4.0


@given(
    admissions=st.lists(
        st.tuples(
            st.floats(min_value=-30, max_value=60),
            st.floats(min_value=0, max_value=40),
            st.integers(min_value=0, max_value=64),
            st.integers(min_value=0, max_value=64),
        ),
        max_size=6,
    ),
    cut_h=st.floats(min_value=0, max_value=48),
)
def test_splitting_the_window_splits_the_usage(
    admissions: list[tuple[float, float, int, int]], cut_h: float
) -> None:
    """Reports of [a, b) and [b, c) add up to the report of [a, c), per team and per job."""
    events = [
        event
        for index, (at_h, span_h, gpus, borrowed) in enumerate(admissions)
        for event in history(
            f"j{index}", (at_h, P.ADMITTED, gpus, borrowed), (at_h + span_h, P.SUCCEEDED)
        )
    ]
    start, cut, end = MAY_1, MAY_1 + cut_h * H, MAY_1 + 48 * H
    whole = usage_report(events, start, end, hourly=True)
    parts = (
        [usage_report(events, start, cut), usage_report(events, cut, end)]
        if start < cut < end
        else [whole]
    )
    assert _hours(whole.jobs) == pytest.approx(sum(_hours(part.jobs) for part in parts))
    total_days = sum(d.gpu_hours for d in whole.days)
    assert total_days == pytest.approx(_hours(whole.jobs), abs=1e-6)
    assert total_days == pytest.approx(sum(sum(d.gpu_hours for d in p.days) for p in parts))
    hours = whole.hours  # the same GPU-hours, an hour at a time, each in its own hour
    in_guarantee = sum(d.gpu_hours_in_guarantee for d in whole.days)
    assert sum(h.gpu_hours_in_guarantee for h in hours) == pytest.approx(in_guarantee, abs=1e-6)
    borrowed = sum(d.gpu_hours_borrowed for d in whole.days)
    assert sum(h.gpu_hours_borrowed for h in hours) == pytest.approx(borrowed, abs=1e-6)
    assert all(start <= h.start_s < end and h.start_s % H == 0 for h in hours)
    assert [h.start_s for h in hours] == sorted({h.start_s for h in hours})


def test_an_hour_holds_at_most_the_gpus_held_for_an_hour() -> None:
    """8 GPUs from 00:30 to 02:15, 4 of them borrowed: 4 GPU-hours in the first hour's half,
    8 in the second hour, 2 in the third's quarter."""
    events = history("a", (0.5, P.ADMITTED, 8, 4), (2.25, P.SUCCEEDED))
    report = usage_report(events, MAY_1, MAY_1 + DAY, hourly=True)
    assert [(h.start_s - MAY_1) / H for h in report.hours] == [0, 1, 2]
    assert [h.gpu_hours_in_guarantee + h.gpu_hours_borrowed for h in report.hours] == [4, 8, 2]
    assert [h.gpu_hours_borrowed for h in report.hours] == [2, 4, 1]
    assert usage_report(events, MAY_1, MAY_1 + DAY).hours == ()  # only when asked for


def _hours(jobs: tuple[JobUsage, ...]) -> float:
    return sum(job.gpu_hours for job in jobs)
