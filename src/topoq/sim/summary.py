"""The summary of a simulation, per team: pure functions over the decision log.

- **GPU-hours** integrate each team's GPUs in use over time, per flavor; the part above the
  team's guarantee in that flavor is *borrowed*, the rest *in guarantee*. A run lasts from its
  ``start`` entry to the entry that ends it (finish, retry, fail, preempt, requeue, cancel), or
  to the end of the simulation.
- **Wait** is from submission to the job's first start; p50 and p95 are nearest-rank
  percentiles over the jobs that started.
- **Utilisation** is the GPU-hours used over the cluster's GPUs (failed nodes included) times
  the simulated span.
- **Shares over time**: the span cut into :data:`SHARE_WINDOWS` equal windows, with the
  GPU-hours each team used in each and its part of all used there, so that one sees fair share
  converge (or not) rather than only its average over the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName, TeamSpec
from topoq.domain.job import JobId
from topoq.domain.quantity import NVIDIA_GPU
from topoq.sim.log import STOPS_A_RUN, Decision, LogEntry, Outcome

SECONDS_PER_HOUR = 3600.0
SHARE_WINDOWS = 10
"""How many equal windows the simulated span is cut into for the teams' shares over time."""


@dataclass(frozen=True)
class UsageInterval:
    job: JobId
    team: TeamName
    flavor: str
    gpus: int | float
    """Whole GPUs, or with shares of one a decimal."""
    start_s: float
    end_s: float


@dataclass(frozen=True)
class WaitStats:
    started: int
    mean_s: float | None = None
    p50_s: float | None = None
    p95_s: float | None = None


@dataclass(frozen=True)
class TeamSummary:
    team: TeamName
    weight: int
    guarantee_gpus: int
    submitted: int
    completed: int
    failed: int
    cancelled: int
    gpu_hours_in_guarantee: float
    gpu_hours_borrowed: float
    wait: WaitStats
    preemptions_suffered: int
    preemptions_caused: int

    @property
    def gpu_hours(self) -> float:
        return self.gpu_hours_in_guarantee + self.gpu_hours_borrowed


@dataclass(frozen=True)
class ShareWindow:
    """The GPU-hours each team used from ``start_s`` to ``end_s`` (every flavor)."""

    start_s: float
    end_s: float
    gpu_hours: Mapping[TeamName, float]

    @property
    def shares(self) -> dict[TeamName, float]:
        """Each team's part of the GPU-hours used in the window (empty when nothing ran)."""
        return shares_of_hours(self.gpu_hours)

    def document(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "end_s": self.end_s,
            "gpu_hours": dict(self.gpu_hours),
            "shares": self.shares,
        }


@dataclass(frozen=True)
class Summary:
    teams: tuple[TeamSummary, ...]
    start_s: float
    end_s: float
    capacity_gpus: int
    gpu_hours_used: float
    utilisation: float
    """GPU-hours used / (capacity × span); 0 for an empty span."""
    windows: tuple[ShareWindow, ...] = ()
    """The teams' GPU-hours over time, :data:`SHARE_WINDOWS` equal windows of the span."""

    def team(self, name: str) -> TeamSummary:
        return next(summary for summary in self.teams if summary.team == name)

    def document(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "end_s": self.end_s,
            "capacity_gpus": self.capacity_gpus,
            "gpu_hours_used": self.gpu_hours_used,
            "utilisation": self.utilisation,
            "teams": [asdict(team) for team in self.teams],
            "windows": [window.document() for window in self.windows],
        }


def summarize(
    entries: Sequence[LogEntry],
    policy: ClusterPolicy,
    *,
    capacity_gpus: int,
    end_s: float,
    start_s: float = 0.0,
) -> Summary:
    """The summary of the log of a run that ended at ``end_s`` on ``capacity_gpus`` GPUs."""
    intervals = usage_intervals(entries, end_s)
    hours = gpu_hours(intervals, guarantees(policy))
    waits = wait_times(entries)
    suffered, caused = preemption_counts(entries)
    counts = decision_counts(entries)
    teams = []
    names = teams_in(policy, entries)
    for team in names:
        spec = policy.by_team.get(team)
        inside, borrowed = hours.get(team, (0.0, 0.0))
        team_counts = counts.get(team, {})
        teams.append(
            TeamSummary(
                team=team,
                weight=spec.fair_share_weight if spec is not None else 0,
                guarantee_gpus=_guaranteed_gpus(spec),
                submitted=team_counts.get(Decision.SUBMIT, 0),
                completed=team_counts.get(Decision.FINISH, 0),
                failed=team_counts.get(Decision.FAIL, 0),
                cancelled=team_counts.get(Decision.CANCEL, 0),
                gpu_hours_in_guarantee=inside,
                gpu_hours_borrowed=borrowed,
                wait=wait_stats(waits.get(team, [])),
                preemptions_suffered=suffered.get(team, 0),
                preemptions_caused=caused.get(team, 0),
            )
        )
    used = sum(team.gpu_hours for team in teams)
    available = capacity_gpus * (end_s - start_s) / SECONDS_PER_HOUR
    utilisation = used / available if available > 0 else 0.0
    windows = share_windows(intervals, names, start_s=start_s, end_s=end_s)
    return Summary(tuple(teams), start_s, end_s, capacity_gpus, used, utilisation, windows)


def _guaranteed_gpus(spec: TeamSpec | None) -> int:
    return sum(q.guarantee.amount(NVIDIA_GPU) for q in spec.quotas) if spec is not None else 0


def teams_in(policy: ClusterPolicy, entries: Iterable[LogEntry]) -> list[TeamName]:
    """The policy's teams in its order, then teams only the log names, as they appear."""
    teams = [team.name for team in policy.teams]
    for entry in entries:
        if entry.team is not None and entry.team not in teams:
            teams.append(entry.team)
    return teams


def guarantees(policy: ClusterPolicy) -> dict[tuple[TeamName, str], int]:
    """GPUs guaranteed per (team, flavor)."""
    return {
        (team.name, quota.flavor): quota.guarantee.amount(NVIDIA_GPU)
        for team in policy.teams
        for quota in team.quotas
    }


def usage_intervals(entries: Iterable[LogEntry], end_s: float) -> list[UsageInterval]:
    """Every run: from its start entry to the entry that ended it, or to ``end_s``."""
    running: dict[JobId, LogEntry] = {}
    intervals: list[UsageInterval] = []

    def close(start: LogEntry, at: float) -> None:
        if start.job is not None and start.team is not None:
            flavor = start.flavor or ""
            gpus = start.gpus or 0
            intervals.append(UsageInterval(start.job, start.team, flavor, gpus, start.t, at))

    for entry in entries:
        if entry.job is None:
            continue
        if entry.decision is Decision.START:
            running[entry.job] = entry
        elif entry.decision in STOPS_A_RUN and entry.job in running:
            close(running.pop(entry.job), entry.t)
    for start in running.values():
        close(start, max(end_s, start.t))
    return intervals


def gpu_hours(
    intervals: Iterable[UsageInterval], guaranteed: Mapping[tuple[TeamName, str], int]
) -> dict[TeamName, tuple[float, float]]:
    """Per team: (GPU-hours inside its guarantee, GPU-hours borrowed)."""
    totals: dict[TeamName, tuple[float, float]] = {}
    for (team, flavor), changes in usage_changes(intervals).items():
        guarantee = guaranteed.get((team, FlavorName(flavor)), 0)
        inside, borrowed = _integrate(guarantee_levels(changes, guarantee))
        before = totals.get(team, (0.0, 0.0))
        totals[team] = (before[0] + inside, before[1] + borrowed)
    return totals


def usage_changes(
    intervals: Iterable[UsageInterval],
) -> dict[tuple[TeamName, str], list[tuple[float, float]]]:
    """Per (team, flavor), in time order, each change of the GPUs it uses: ``(t, +gpus)``
    where a run starts, ``(t, -gpus)`` where one ends (an end before a start at one instant)."""
    changes: dict[tuple[TeamName, str], list[tuple[float, float]]] = {}
    for interval in intervals:
        steps = changes.setdefault((interval.team, interval.flavor), [])
        steps.extend(((interval.start_s, interval.gpus), (interval.end_s, -interval.gpus)))
    return {key: sorted(steps) for key, steps in changes.items()}


def guarantee_levels(
    changes: Iterable[tuple[float, float]], guarantee: int
) -> Iterator[tuple[float, float, float]]:
    """After each of :func:`usage_changes`: ``(t, GPUs in use inside the guarantee, GPUs in
    use above it)``. The GPU-hours in guarantee and borrowed integrate this split; the
    simulation report draws it over time."""
    level: float = 0
    for at, change in changes:
        level += change
        yield at, min(level, guarantee), max(level - guarantee, 0)


def _integrate(levels: Iterable[tuple[float, float, float]]) -> tuple[float, float]:
    """GPU-hours inside the guarantee and borrowed, of :func:`guarantee_levels`."""
    inside = borrowed = 0.0
    previous: tuple[float, float, float] | None = None
    for level in levels:
        if previous is not None:
            span = (level[0] - previous[0]) / SECONDS_PER_HOUR
            inside += previous[1] * span
            borrowed += previous[2] * span
        previous = level
    return inside, borrowed


def share_windows(
    intervals: Iterable[UsageInterval],
    teams: Sequence[TeamName],
    *,
    start_s: float,
    end_s: float,
    count: int = SHARE_WINDOWS,
) -> tuple[ShareWindow, ...]:
    """The GPU-hours of every team in ``count`` equal windows from ``start_s`` to ``end_s``
    (none for an empty span); each run counts in the windows it overlaps, for the overlap."""
    if end_s <= start_s:
        return ()
    width = (end_s - start_s) / count
    bounds = [(start_s + index * width, start_s + (index + 1) * width) for index in range(count)]
    bounds[-1] = (bounds[-1][0], end_s)
    hours = [dict.fromkeys(teams, 0.0) for _ in bounds]
    for interval in intervals:
        first = max(0, int((interval.start_s - start_s) // width))
        for index in range(first, count):
            low, high = bounds[index]
            if low >= interval.end_s:
                break
            overlap = min(high, interval.end_s) - max(low, interval.start_s)
            if overlap > 0:
                used = overlap * interval.gpus / SECONDS_PER_HOUR
                hours[index][interval.team] = hours[index].get(interval.team, 0.0) + used
    return tuple(
        ShareWindow(low, high, team_hours)
        for (low, high), team_hours in zip(bounds, hours, strict=True)
    )


def shares_of_hours(hours: Mapping[TeamName, float]) -> dict[TeamName, float]:
    """Each team's part of the GPU-hours (empty when there are none)."""
    total = sum(hours.values())
    return {team: used / total for team, used in hours.items()} if total > 0 else {}


def wait_times(entries: Iterable[LogEntry]) -> dict[TeamName, list[float]]:
    """Per team, submission to first start of every job that started."""
    submitted: dict[JobId, float] = {}
    started: set[JobId] = set()
    waits: dict[TeamName, list[float]] = {}
    for entry in entries:
        if entry.job is None or entry.team is None:
            continue
        if entry.decision is Decision.SUBMIT:
            submitted[entry.job] = entry.t
        elif entry.decision is Decision.START and entry.job not in started:
            started.add(entry.job)
            waits.setdefault(entry.team, []).append(entry.t - submitted.get(entry.job, entry.t))
    return waits


def wait_stats(waits: Sequence[float]) -> WaitStats:
    if not waits:
        return WaitStats(0)
    return WaitStats(
        len(waits), sum(waits) / len(waits), percentile(waits, 50), percentile(waits, 95)
    )


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``percent``% at or below."""
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def preemption_counts(
    entries: Iterable[LogEntry],
) -> tuple[dict[TeamName, int], dict[TeamName, int]]:
    """Per team: preemptions its jobs suffered, and preemptions its jobs caused."""
    team_of: dict[JobId, TeamName] = {}
    suffered: dict[TeamName, int] = {}
    caused: dict[TeamName, int] = {}
    for entry in entries:
        if entry.job is not None and entry.team is not None:
            team_of.setdefault(entry.job, entry.team)
        if entry.decision is not Decision.PREEMPT or entry.team is None:
            continue
        suffered[entry.team] = suffered.get(entry.team, 0) + 1
        preemptor = team_of.get(entry.for_job) if entry.for_job is not None else None
        if preemptor is not None:
            caused[preemptor] = caused.get(preemptor, 0) + 1
    return suffered, caused


def decision_counts(entries: Iterable[LogEntry]) -> dict[TeamName, dict[Decision, int]]:
    """Per team, how many entries of each decision (a cancel of a finished job not counted)."""
    counts: dict[TeamName, dict[Decision, int]] = {}
    for entry in entries:
        if entry.team is None or entry.reason == Outcome.ALREADY_FINISHED:
            continue
        team = counts.setdefault(entry.team, {})
        team[entry.decision] = team.get(entry.decision, 0) + 1
    return counts
