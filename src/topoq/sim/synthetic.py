"""Synthetic traces for tests and benchmarks: ``synthetic_trace(workload)`` draws jobs with
Poisson arrivals at a mean interval, GPU counts from a size mix, log-normal durations around
a median, and teams by their share of the arrivals, from a seed (the same seed, the same
trace). The result is a ``Trace`` like a real one's, replayed the same way (``trace_scenario``)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from topoq.domain.errors import InvalidInputError
from topoq.sim.traces import MAX_TRACE_JOBS, Trace, TraceFormat, TraceJob


@dataclass(frozen=True)
class SyntheticWorkload:
    jobs: int
    mean_interval_s: float
    """The mean time between two arrivals (exponentially distributed)."""
    sizes: Mapping[int, float]
    """GPU count: its weight in the mix."""
    median_duration_s: float
    duration_sigma: float = 1.0
    """The spread of the log-normal durations (0: every job runs the median)."""
    teams: Mapping[str, float] = field(default_factory=lambda: {"team-a": 1.0})
    """Team: its share of the arrivals."""
    guarantees: Mapping[str, int] = field(default_factory=dict)
    """Team: its guarantee in 8-GPU nodes (a team not named: none)."""
    seed: int = 0


def synthetic_trace(workload: SyntheticWorkload) -> Trace:
    """The jobs drawn, by arrival (the first at 0)."""
    _check(workload)
    draw = random.Random(workload.seed)
    sizes, size_weights = list(workload.sizes), list(workload.sizes.values())
    teams, team_weights = list(workload.teams), list(workload.teams.values())
    arrival = 0.0
    jobs = []
    for number in range(workload.jobs):
        if number:
            arrival += draw.expovariate(1.0 / workload.mean_interval_s)
        duration = workload.median_duration_s * math.exp(draw.gauss(0.0, workload.duration_sigma))
        jobs.append(
            TraceJob(
                f"synthetic-{number + 1}",
                draw.choices(teams, team_weights)[0],
                arrival,
                max(1.0, round(duration)),
                draw.choices(sizes, size_weights)[0],
                number + 2,
            )
        )
    note = (
        f"a synthetic trace of {workload.jobs} jobs (seed {workload.seed}), "
        f"one every {workload.mean_interval_s:g} s on average"
    )
    return Trace(
        "synthetic", TraceFormat.SYNTHETIC, tuple(jobs), dict(workload.guarantees), (note,)
    )


def _check(workload: SyntheticWorkload) -> None:
    def refuse(where: str, message: str, hint: str) -> None:
        raise InvalidInputError(message, where=where, hint=hint)

    if not 1 <= workload.jobs <= MAX_TRACE_JOBS:
        refuse("jobs", f"{workload.jobs} jobs", f"draw 1 to {MAX_TRACE_JOBS:,} jobs")
    if not workload.mean_interval_s > 0 or not math.isfinite(workload.mean_interval_s):
        refuse("mean_interval_s", f"{workload.mean_interval_s} s", "a positive number of seconds")
    if not workload.median_duration_s >= 1 or not math.isfinite(workload.median_duration_s):
        refuse("median_duration_s", f"{workload.median_duration_s} s", "at least 1 s")
    if not 0 <= workload.duration_sigma <= 10:
        refuse("duration_sigma", f"{workload.duration_sigma}", "a spread from 0 to 10")
    for name, mix in (("sizes", workload.sizes), ("teams", workload.teams)):
        if not mix or any(not weight >= 0 for weight in mix.values()) or not sum(mix.values()) > 0:
            refuse(name, f"the {name} mix {dict(mix)}", "give weights of at least 0, not all 0")
    if any(not isinstance(gpus, int) or gpus < 1 for gpus in workload.sizes):
        refuse("sizes", f"GPU counts {sorted(workload.sizes)}", "GPU counts are whole, at least 1")
