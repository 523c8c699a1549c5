"""Synthetic traces (``topoq.sim.synthetic``): drawn from a seed, with the mean arrival
interval, size mix, median duration and team shares asked for, replayed like a real trace;
a workload that cannot be drawn is refused naming its field."""

from __future__ import annotations

import itertools
import statistics

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.sim.engine import Simulation
from topoq.sim.synthetic import SyntheticWorkload, synthetic_trace
from topoq.sim.traces import TraceFormat, trace_scenario

MIX = SyntheticWorkload(
    jobs=4000,
    mean_interval_s=30.0,
    sizes={1: 6.0, 8: 3.0, 32: 1.0},
    median_duration_s=600.0,
    duration_sigma=0.8,
    teams={"nlp": 3.0, "vision": 1.0},
    guarantees={"nlp": 4},
    seed=7,
)


def test_a_synthetic_trace_has_the_mix_asked_for() -> None:
    trace = synthetic_trace(MIX)
    assert trace.format is TraceFormat.SYNTHETIC and len(trace.jobs) == 4000
    assert trace == synthetic_trace(MIX)  # the same seed, the same trace
    assert trace != synthetic_trace(SyntheticWorkload(**{**MIX.__dict__, "seed": 8}))
    arrivals = [job.arrival_s for job in trace.jobs]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert statistics.fmean(gaps) == pytest.approx(30.0, rel=0.08)
    share = {gpus: sum(job.gpus == gpus for job in trace.jobs) / 4000 for gpus in (1, 8, 32)}
    assert share == pytest.approx({1: 0.6, 8: 0.3, 32: 0.1}, abs=0.03)
    median = statistics.median(job.duration_s for job in trace.jobs)
    assert median == pytest.approx(600.0, rel=0.08)
    nlp = sum(job.team == "nlp" for job in trace.jobs) / 4000
    assert nlp == pytest.approx(0.75, abs=0.03)
    assert trace.guarantees == {"nlp": 4}


def test_a_synthetic_trace_replays_like_a_real_one() -> None:
    small = SyntheticWorkload(**{**MIX.__dict__, "jobs": 200})
    trace = synthetic_trace(small)
    result = Simulation(trace_scenario(trace)).run()
    assert sum(team.completed for team in result.summary.teams) == 200
    held = sum(job.gpus * job.duration_s for job in trace.jobs) / 3600
    used = sum(team.gpu_hours for team in result.summary.teams)
    preempted = sum(team.preemptions_suffered for team in result.summary.teams)
    assert preempted > 0  # nlp takes its guarantee back from vision's borrowing
    assert used > held  # a preempted job runs again from its start


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"jobs": 0}, "jobs"),
        ({"mean_interval_s": 0.0}, "mean_interval_s"),
        ({"median_duration_s": float("nan")}, "median_duration_s"),
        ({"duration_sigma": -1.0}, "duration_sigma"),
        ({"sizes": {}}, "sizes"),
        ({"sizes": {0: 1.0}}, "sizes"),
        ({"teams": {"nlp": 0.0}}, "teams"),
    ],
)
def test_a_workload_that_cannot_be_drawn_is_refused(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        synthetic_trace(SyntheticWorkload(**{**MIX.__dict__, **change}))  # type: ignore[arg-type]
    assert raised.value.where == field and raised.value.hint
