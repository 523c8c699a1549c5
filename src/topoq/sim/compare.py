"""Policies side by side (``topoq simulate --trace FILE --policy A --policy B``): the same
arrivals replayed under each policy, and the figures an admin compares them by — job
completion time and wait (mean, p50, p99), makespan, GPU utilisation, fragmentation (free GPUs
no waiting gang can use: ``sim.fragmentation``), preemptions, fairness (Jain's index over the
teams' weighted shares of the GPU-hours) and, per team, wait and GPU-hours inside the guarantee
and borrowed. Worked out from the run's decision log."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from topoq.sim.engine import SimulationResult
from topoq.sim.fragmentation import fragmentation
from topoq.sim.log import Decision


@dataclass(frozen=True)
class Spread:
    """Mean, median and 99th percentile (None: no value)."""

    mean: float | None
    p50: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(None, None, None)
        ordered = sorted(values)
        return cls(sum(ordered) / len(ordered), _rank(ordered, 0.5), _rank(ordered, 0.99))


def _rank(ordered: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class TeamFigures:
    team: str
    jobs: int
    wait: Spread
    gpu_hours_in_guarantee: float
    gpu_hours_borrowed: float


@dataclass(frozen=True)
class PolicyFigures:
    policy: str
    """What the policy was given as (its file)."""
    jobs: int
    completed: int
    completion: Spread
    """Seconds from submission to the end of the job's last run, of the jobs that ended."""
    wait: Spread
    """Seconds from submission to the job's first start, of the jobs that started."""
    makespan_s: float
    """From the first submission to the last end."""
    utilisation: float
    preemptions: int
    fairness: float | None
    """Jain's index of the teams' GPU-hours over their weights: 1 when every team got
    GPU-hours in proportion to its weight, 1/n when one of n teams got them all (None: no
    GPU-hours)."""
    teams: tuple[TeamFigures, ...]
    slowdown: Spread = Spread(None, None, None)
    """Under the cost model, of the runs that ended: how many times as long each took as
    its trace says (1: its tightest placement alone)."""
    at_best_span: float | None = None
    """Under the cost model: the share of multi-node gangs whose span at every level was the
    fewest domains the free capacity at their start allowed (None: none, or no model)."""
    fragmentation: float | None = None
    """While a job waited: the time-weighted mean share of the cluster's GPUs that were free
    on nodes where no waiting job's pod could go (``sim.fragmentation``; None: no job waited,
    or the run does not say where pods ran)."""

    def document(self) -> dict[str, Any]:
        return asdict(self)


def policy_figures(policy: str, result: SimulationResult) -> PolicyFigures:
    """The figures of one run (``policy``: how to name it)."""
    submitted: dict[str, float] = {}
    team_of: dict[str, str] = {}
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    preemptions = 0
    slowdowns: list[float] = []
    spans: list[bool] = []
    for entry in result.log:
        job = entry.job
        if entry.decision is Decision.FINISH and entry.slowdown is not None:
            slowdowns.append(entry.slowdown)
        elif entry.decision is Decision.ADMIT and max(entry.best_span.values(), default=1) > 1:
            spans.append(_at_best_span(entry.placement, entry.best_span))
        if entry.decision is Decision.SUBMIT and job is not None:
            submitted[job] = entry.t
            team_of[job] = str(entry.team)
        elif entry.decision is Decision.START and job is not None:
            started.setdefault(job, entry.t)
        elif entry.decision is Decision.FINISH and job is not None:
            ended[job] = entry.t
        elif entry.decision is Decision.PREEMPT:
            preemptions += 1
    waits = {job: started[job] - at for job, at in submitted.items() if job in started}
    summary = result.summary
    first = min(submitted.values(), default=0.0)
    teams = tuple(
        TeamFigures(
            team.team,
            team.submitted,
            Spread.of([wait for job, wait in waits.items() if team_of[job] == team.team]),
            team.gpu_hours_in_guarantee,
            team.gpu_hours_borrowed,
        )
        for team in summary.teams
    )
    return PolicyFigures(
        policy=policy,
        jobs=len(submitted),
        completed=len(ended),
        completion=Spread.of([ended[job] - submitted[job] for job in ended if job in submitted]),
        wait=Spread.of(list(waits.values())),
        makespan_s=max(ended.values(), default=first) - first,
        utilisation=summary.utilisation,
        preemptions=preemptions,
        fairness=jain([(team.gpu_hours, team.weight) for team in summary.teams if team.submitted]),
        teams=teams,
        slowdown=Spread.of(slowdowns),
        at_best_span=sum(spans) / len(spans) if spans else None,
        fragmentation=fragmentation(result.log, result.nodes, result.pod_sets, result.end_s),
    )


SUMMARY_COLUMNS = (
    "Policy",
    "Jobs done",
    "Completion mean / p50 / p99",
    "Wait mean / p50 / p99",
    "Makespan",
    "GPU util.",
    "Fragmented",
    "Preempted",
    "Fairness",
    "Slow-down mean / p99",
    "At best span",
)
"""The comparison table's columns, in the terminal and in the report."""


def summary_cells(one: PolicyFigures, as_time: Callable[[float], str]) -> tuple[str, ...]:
    """One row of the comparison table (``SUMMARY_COLUMNS``); ``as_time`` writes seconds."""

    def time(seconds: float | None) -> str:
        return "-" if seconds is None else as_time(seconds)

    def spread(values: Spread) -> str:
        return f"{time(values.mean)} / {time(values.p50)} / {time(values.p99)}"

    slowdown = one.slowdown
    return (
        one.policy,
        f"{one.completed} of {one.jobs}",
        spread(one.completion),
        spread(one.wait),
        as_time(one.makespan_s),
        f"{one.utilisation:.0%}",
        "-" if one.fragmentation is None else f"{one.fragmentation:.1%}",
        str(one.preemptions),
        "-" if one.fairness is None else f"{one.fairness:.3f}",
        "-"
        if slowdown.mean is None or slowdown.p99 is None
        else f"{slowdown.mean:.3f} / {slowdown.p99:.3f}",
        "-" if one.at_best_span is None else f"{one.at_best_span:.0%}",
    )


def _at_best_span(placement: Mapping[str, Sequence[str]], best: Mapping[str, int]) -> bool:
    """Whether an admitted gang used no more domains at any level than the fewest possible."""
    return all(len(placement.get(label, ())) <= fewest for label, fewest in best.items())


def jain(shares: Sequence[tuple[float, int]]) -> float | None:
    """Jain's fairness index of ``(amount, weight)`` pairs: ``(Σx)² / (n·Σx²)`` over
    ``x = amount / weight`` (a weight of 0 counts as 1)."""
    values = [amount / (weight or 1) for amount, weight in shares]
    squares = sum(value * value for value in values)
    if not values or squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)
