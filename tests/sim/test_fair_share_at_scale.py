"""Fair share at scale (examples/scenarios/fair-share-at-scale.yaml): three teams weighted 1:2:3,
each submitting an 8-GPU job of 300 s every 5 s on 64 nodes, none guaranteed anything. Over the
second half of the run each team's part of the used GPUs is within 5 percentage points of
weight / sum of weights, as the summary's windows show.

The run here is the whole scenario, 12,000 jobs over 20,000 s (about half a minute of CPU);
its speed is not what is tested: ``python -m benchmarks.simulation`` measures it.
"""

from __future__ import annotations

import pytest

from tests.sim.conftest import SCENARIOS
from topoq.sim import Simulation, SimulationResult, load_scenario
from topoq.sim.summary import SHARE_WINDOWS, shares_of_hours

WEIGHTS = {"vision": 1, "nlp": 2, "speech": 3}
TOLERANCE = 0.05
"""Percentage points, as a fraction."""


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    return Simulation(load_scenario(SCENARIOS / "fair-share-at-scale.yaml")).run()


def test_the_used_gpus_split_by_the_weights_over_the_second_half(result: SimulationResult) -> None:
    second_half = result.summary.windows[SHARE_WINDOWS // 2 :]
    hours = {team: sum(window.gpu_hours[team] for window in second_half) for team in WEIGHTS}
    shares = shares_of_hours(hours)
    total = sum(WEIGHTS.values())
    for team, weight in WEIGHTS.items():
        assert abs(shares[team] - weight / total) <= TOLERANCE, (team, shares)


def test_the_premise_every_team_always_has_work_waiting_on_a_full_cluster(
    result: SimulationResult,
) -> None:
    assert {job.team for job in result.left_pending} == set(WEIGHTS)
    assert result.summary.utilisation > 0.95
    # no guarantees: everything used is borrowed, so fair share alone decides
    assert all(team.gpu_hours_in_guarantee == 0 for team in result.summary.teams)


def test_the_scenario_submits_12000_jobs_over_20000_s() -> None:
    scenario = load_scenario(SCENARIOS / "fair-share-at-scale.yaml")
    assert len(scenario.events) == 12_000
    assert scenario.until_s == 20_000
    assert scenario.events[-1].at_s == 19_995
