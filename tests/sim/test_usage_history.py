"""Fair share with usage history (examples/scenarios/usage-history.yaml): early has the idle
cluster alone all morning; when late starts submitting at noon, late's jobs go first until
the two teams' usage evens out. Without history (half-life 0) they split the cluster at once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.sim.conftest import SCENARIOS, entries
from topoq.sim import Simulation, SimulationResult, load_scenario
from topoq.sim.summary import usage_intervals

SCENARIO = SCENARIOS / "usage-history.yaml"
NOON_S = 21600
HOUR_S = 3600
END_S = 43200


def gpu_hours_between(result: SimulationResult, start_s: float, end_s: float) -> dict[str, float]:
    hours = {"early": 0.0, "late": 0.0}
    for interval in usage_intervals(result.log, result.end_s):
        overlap = min(end_s, interval.end_s) - max(start_s, interval.start_s)
        if overlap > 0:
            hours[interval.team] += overlap * interval.gpus / HOUR_S
    return hours


def simulate(path: Path, half_life_s: float | None = None) -> tuple[Simulation, SimulationResult]:
    scenario = load_scenario(path)
    if half_life_s is not None:
        policy = replace(scenario.policy, fair_share_usage_half_life_s=half_life_s)
        scenario = replace(scenario, policy=policy)
    simulation = Simulation(scenario)
    return simulation, simulation.run()


@pytest.fixture(scope="module")
def with_history() -> tuple[Simulation, SimulationResult]:
    return simulate(SCENARIO)


def test_late_goes_first_in_the_afternoon_until_usage_evens_out(
    with_history: tuple[Simulation, SimulationResult],
) -> None:
    simulation, result = with_history
    first_hour = gpu_hours_between(result, NOON_S, NOON_S + HOUR_S)
    last_hour = gpu_hours_between(result, END_S - HOUR_S, END_S)
    assert gpu_hours_between(result, 0, NOON_S)["late"] == 0  # early alone all morning
    assert first_hour["late"] > 2 * first_hour["early"]
    assert last_hour["late"] == pytest.approx(last_hour["early"], rel=0.1)
    usage = simulation.fair_share_usage
    assert usage["late"].share == pytest.approx(usage["early"].share, abs=0.05)


def test_late_takes_every_freed_node_until_its_position_reaches_early_s(
    with_history: tuple[Simulation, SimulationResult],
) -> None:
    """Four of early's jobs end every five minutes. From noon late's position (share now plus
    usage) is far below early's (0.875 of usage), so late's jobs take every freed node — 12 of
    the 16 by 12:10 — before early gets one; then the two alternate as their positions meet."""
    _, result = with_history
    afternoon = [e.team for e in entries(result.log, "admit") if e.t >= NOON_S]
    assert afternoon[:12] == ["late"] * 12
    assert afternoon[12:16].count("early") >= 1


def test_without_history_the_teams_split_the_cluster_from_the_start() -> None:
    _, result = simulate(SCENARIO, half_life_s=0)
    first_hour = gpu_hours_between(result, NOON_S, NOON_S + HOUR_S)
    assert first_hour["late"] == pytest.approx(first_hour["early"], rel=0.1)
