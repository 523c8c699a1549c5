"""The summary's arithmetic, on a scenario small enough to work out by hand."""

from __future__ import annotations

import pytest

from tests.sim.conftest import WriteScenario
from topoq.domain.governance import TeamName
from topoq.domain.job import JobId
from topoq.sim import Decision, LogEntry, run_scenario
from topoq.sim.summary import (
    UsageInterval,
    gpu_hours,
    percentile,
    share_windows,
    usage_intervals,
    wait_stats,
)

TINY_POLICY = {
    "teams": [
        {
            "name": "a",
            "borrowLimitPercent": 100,
            "quotas": [{"flavor": "p5.48xlarge", "accelerators": 8}],
        },
        {"name": "b", "quotas": [{"flavor": "p5.48xlarge", "accelerators": 8}]},
    ]
}


def test_a_hand_computed_scenario(write_scenario: WriteScenario) -> None:
    """Two nodes (16 GPUs); a and b are each guaranteed 8 GPUs, a may borrow 8.

    t=0     a1 (1 h) within a's guarantee, a2 (30 min) borrowed from b; a3 (10 min) waits at
            a's borrow limit.
    t=900   b1 (30 min) reclaims: a1 is preempted, b1 starts.
    t=1800  a2 ends; a1 restarts from zero (inside a's guarantee) and runs to 5400.
    t=2700  b1 ends; a3 borrows b's node until 3300.

    a's GPUs: 16 on [0, 900), 8 on [900, 2700), 16 on [2700, 3300), 8 on [3300, 5400):
    inside the guarantee 8 GPUs × 1.5 h = 12 GPU-h; borrowed 8 × (900 + 600) s = 3.333 GPU-h.
    b: 8 GPUs × 0.5 h = 4 GPU-h, none borrowed. Used 19.333 of 16 × 1.5 = 24: 80.6%.
    a's waits 0, 0, 2700 s: mean 900, p50 0, p95 2700.
    """
    path = write_scenario(
        [
            {"at": 0, "submit": {"id": "a1", "team": "a", "runtime_s": 3600, "gpus": 8}},
            {"at": 0, "submit": {"id": "a2", "team": "a", "runtime_s": 1800, "gpus": 8}},
            {"at": 0, "submit": {"id": "a3", "team": "a", "runtime_s": 600, "gpus": 8}},
            {"at": 900, "submit": {"id": "b1", "team": "b", "runtime_s": 1800, "gpus": 8}},
        ],
        cluster={"generate": "1x2 p5.48xlarge"},
        policy=TINY_POLICY,
    )
    result = run_scenario(path)
    summary = result.summary
    a, b = summary.team("a"), summary.team("b")
    assert a.gpu_hours_in_guarantee == pytest.approx(12.0)
    assert a.gpu_hours_borrowed == pytest.approx(8 * 1500 / 3600)
    assert (b.gpu_hours_in_guarantee, b.gpu_hours_borrowed) == (pytest.approx(4.0), 0.0)
    assert summary.end_s == 5400
    assert summary.capacity_gpus == 16
    assert summary.gpu_hours_used == pytest.approx(12 + 8 * 1500 / 3600 + 4)
    assert summary.utilisation == pytest.approx((12 + 8 * 1500 / 3600 + 4) / 24)
    assert (a.wait.started, a.wait.mean_s, a.wait.p50_s, a.wait.p95_s) == (3, 900, 0, 2700)
    assert (a.preemptions_suffered, a.preemptions_caused) == (1, 0)
    assert (b.preemptions_suffered, b.preemptions_caused) == (0, 1)
    assert (a.submitted, a.completed, b.completed) == (3, 3, 1)
    assert (a.guarantee_gpus, a.weight) == (8, 1)


def entry(t: float, decision: Decision, job: str, gpus: int | None = None) -> LogEntry:
    return LogEntry(t, decision, JobId(job), TeamName("t"), flavor="f" if gpus else None, gpus=gpus)


def test_runs_end_at_the_entry_that_stops_them_or_at_the_end() -> None:
    log = [
        entry(0, Decision.SUBMIT, "x"),
        entry(10, Decision.START, "x", 4),
        entry(15, Decision.PREEMPT, "x"),  # it runs on while it stops
        entry(20, Decision.STOPPED, "x"),
        entry(30, Decision.START, "x", 4),
        entry(40, Decision.RETRY, "x"),
        entry(50, Decision.CANCEL, "x"),  # not running: ends nothing
        entry(60, Decision.START, "y", 2),
    ]
    assert usage_intervals(log, end_s=100) == [
        UsageInterval(JobId("x"), TeamName("t"), "f", 4, 10, 20),
        UsageInterval(JobId("x"), TeamName("t"), "f", 4, 30, 40),
        UsageInterval(JobId("y"), TeamName("t"), "f", 2, 60, 100),
    ]


def test_only_use_above_the_guarantee_counts_as_borrowed() -> None:
    team = TeamName("t")
    intervals = [
        UsageInterval(JobId("x"), team, "f", 6, 0, 3600),
        UsageInterval(JobId("y"), team, "f", 6, 1800, 5400),
        UsageInterval(JobId("z"), team, "other", 2, 0, 3600),
    ]
    inside, borrowed = gpu_hours(intervals, {(team, "f"): 8})[team]
    # flavor f: 6 GPUs for 0.5 h, 12 for 0.5 h (8 inside, 4 borrowed), 6 for 0.5 h;
    # flavor other has no guarantee: 2 GPUs for 1 h, all borrowed.
    assert inside == pytest.approx(6 * 0.5 + 8 * 0.5 + 6 * 0.5)
    assert borrowed == pytest.approx(4 * 0.5 + 2 * 1)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 50) == 10
    assert percentile(values, 95) == 19
    assert percentile([7.0], 95) == 7
    stats = wait_stats([30.0, 10.0, 20.0])
    assert (stats.started, stats.mean_s, stats.p50_s, stats.p95_s) == (3, 20, 20, 30)
    assert wait_stats([]).mean_s is None


def test_share_windows_count_each_run_for_its_overlap_with_each_window() -> None:
    runs = [
        UsageInterval(JobId("a1"), TeamName("a"), "f", 8, 0.0, 5400.0),
        UsageInterval(JobId("b1"), TeamName("b"), "f", 8, 3600.0, 7200.0),
    ]
    windows = share_windows(
        runs, [TeamName("a"), TeamName("b")], start_s=0.0, end_s=7200.0, count=2
    )
    assert [(w.start_s, w.end_s) for w in windows] == [(0.0, 3600.0), (3600.0, 7200.0)]
    assert windows[0].gpu_hours == {"a": 8.0, "b": 0.0}
    assert windows[1].gpu_hours == {"a": 4.0, "b": 8.0}
    assert windows[1].shares == pytest.approx({"a": 1 / 3, "b": 2 / 3})
    assert share_windows(runs, [TeamName("a")], start_s=0.0, end_s=0.0) == ()
