"""Fair share converges: with saturating demand from teams weighted 1:2:3, the borrowed
GPU-hours split 1:2:3 (within 10%) — from a common start, and after a team arrives late."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.sim.conftest import SCENARIOS, entries
from topoq.sim import SimulationResult, load_scenario, run_scenario
from topoq.sim.summary import gpu_hours, guarantees, usage_intervals

WEIGHTS = {"vision": 1, "nlp": 2, "speech": 3}
TOLERANCE = 0.10
LATE_ARRIVAL_S = 3600
LATE_END_S = 21600


def assert_weighted(shares: dict[str, float]) -> None:
    total = sum(WEIGHTS.values())
    for team, weight in WEIGHTS.items():
        expected = weight / total
        assert abs(shares[team] - expected) <= TOLERANCE * expected, (team, shares)


def borrowed_shares(result: SimulationResult, path: Path, start_s: float) -> dict[str, float]:
    """Each team's part of the GPU-hours borrowed from ``start_s`` to the end."""
    clipped = [
        replace(interval, start_s=max(interval.start_s, start_s))
        for interval in usage_intervals(result.log, result.end_s)
        if interval.end_s > start_s
    ]
    hours = gpu_hours(clipped, guarantees(load_scenario(path).policy))
    total = sum(borrowed for _, borrowed in hours.values())
    return {team: borrowed / total for team, (_, borrowed) in hours.items()}


def test_borrowed_gpu_hours_split_by_the_weights_1_2_3() -> None:
    result = run_scenario(SCENARIOS / "fair-share.yaml")
    teams = result.summary.teams
    borrowed = {team.team: team.gpu_hours_borrowed for team in teams}
    total = sum(borrowed.values())
    assert_weighted({team: hours / total for team, hours in borrowed.items()})
    # the premise: demand saturates (every team still has work waiting at the end) and
    # most of what runs is borrowed
    assert {job.team for job in result.left_pending} == set(WEIGHTS)
    assert all(t.gpu_hours_borrowed > 2 * t.gpu_hours_in_guarantee for t in teams)
    assert result.summary.utilisation > 0.95


@pytest.fixture(scope="module")
def late_team(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulationResult, Path]:
    """The fair-share example with 2-hour jobs and speech arriving an hour late, so that only
    fair-share preemption (not jobs ending) can give speech its share soon."""
    document = yaml.safe_load((SCENARIOS / "fair-share.yaml").read_text(encoding="utf-8"))
    document["cluster"] = str(SCENARIOS / "cluster.yaml")
    document["until_s"] = LATE_END_S
    for event in document["events"]:
        stream = event["stream"]
        stream.update(runtime_s=7200, count=stream["batch"] * LATE_END_S // stream["every_s"])
        if stream["team"] == "speech":
            event["at"] = LATE_ARRIVAL_S
    path = tmp_path_factory.mktemp("late") / "late-team.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return run_scenario(path), path


def test_a_late_team_gets_its_weighted_share_through_fair_share_preemption(
    late_team: tuple[SimulationResult, Path],
) -> None:
    result, path = late_team
    preempted_for_speech = [
        e
        for e in entries(result.log, "preempt")
        if e.reason == "PREEMPTED_FOR_FAIR_SHARE" and (e.for_job or "").startswith("speech")
    ]
    assert preempted_for_speech
    assert_weighted(borrowed_shares(result, path, LATE_ARRIVAL_S + 3600))


def test_fair_share_preemption_evicts_no_job_that_is_readmitted_at_once(
    late_team: tuple[SimulationResult, Path],
) -> None:
    result, _ = late_team
    admitted = {(e.job, e.t) for e in entries(result.log, "admit")}
    churned = [e for e in entries(result.log, "preempt") if (e.job, e.t) in admitted]
    assert churned == []
