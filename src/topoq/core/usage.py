"""Usage reports: GPU-hours per team per UTC day and per job, from the jobs' phase events.

- A job **holds** the allocation its ``admitted`` event booked until the next event that ends
  the holding: finished, preempted, requeued or cancelled (any phase that does not hold
  capacity), or a new admission. ``running`` continues the holding. A holding still open when
  the events end is counted up to ``open_until_s`` (now).
- The GPUs recorded as ``borrowed`` at admission (above the team's guarantee then) are
  **borrowed** GPU-hours for the whole holding; the rest are GPU-hours **in guarantee**. A
  share of a GPU (``topoq.io/gpu-milli``) counts as its part of one GPU, as in the quotas.
- Holdings are cut at the window ``[start_s, end_s)`` and at every midnight UTC. A team's day
  counts the jobs that held GPUs that day and the preemptions its jobs suffered that day.
- Per job: GPU-hours, borrowed GPU-hours, wall time holding GPUs and attempts (admissions
  whose holding falls in the window).
- Per UTC hour (asked for): the GPU-hours of every team reported, in guarantee and borrowed,
  holdings cut at every full hour: the GPUs in use over time, an hour at a time.

Pure: the caller brings the events (of every job that may have held GPUs in the window,
including the admission of a holding that began before it) and the current time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Protocol

from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE
from topoq.domain.job import Allocation, JobId, JobPhase
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


class PhaseEvent(Protocol):
    """One entry of a job's phase history (the store's ``JobEvent`` is one)."""

    @property
    def job(self) -> JobId: ...
    @property
    def team(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def at_s(self) -> float: ...
    @property
    def phase(self) -> JobPhase: ...
    @property
    def allocation(self) -> Allocation | None: ...


@dataclass(frozen=True)
class GpuHolding:
    """What one admission held, and from when to when."""

    job: JobId
    team: str
    start_s: float
    end_s: float
    gpus: float
    """GPUs held (a whole number unless the job holds shares of a GPU)."""
    borrowed_gpus: float


@dataclass(frozen=True)
class TeamDayUsage:
    team: str
    day: date
    gpu_hours_in_guarantee: float
    gpu_hours_borrowed: float
    jobs: int
    """Jobs that held GPUs on this day."""
    preemptions: int
    """Preemptions the team's jobs suffered on this day."""

    @property
    def gpu_hours(self) -> float:
        return self.gpu_hours_in_guarantee + self.gpu_hours_borrowed


@dataclass(frozen=True)
class HourUsage:
    start_s: float
    """The hour's start (a full UTC hour, seconds since the epoch)."""
    gpu_hours_in_guarantee: float
    gpu_hours_borrowed: float


@dataclass(frozen=True)
class JobUsage:
    job: JobId
    team: str
    gpu_hours: float
    gpu_hours_borrowed: float
    wall_time_s: float
    """Time the job held GPUs inside the window."""
    attempts: int
    """Admissions whose holding falls in the window."""


@dataclass(frozen=True)
class UsageReport:
    start_s: float
    end_s: float
    days: tuple[TeamDayUsage, ...]
    """Ordered by team, then day; only days on which the team held GPUs or was preempted."""
    jobs: tuple[JobUsage, ...]
    """Ordered by team, then job."""
    hours: tuple[HourUsage, ...] = ()
    """Every hour of the window on which GPUs were held, in order (when asked for)."""


def usage_report(
    events: Iterable[PhaseEvent],
    start_s: float,
    end_s: float,
    *,
    open_until_s: float | None = None,
    hourly: bool = False,
) -> UsageReport:
    """The usage of ``[start_s, end_s)``; holdings without an end count up to ``open_until_s``
    (default: the end of the window); with ``hourly``, per UTC hour too."""
    if not (math.isfinite(start_s) and math.isfinite(end_s)) or end_s <= start_s:
        raise InvalidInputError(
            f"the window [{start_s}, {end_s}) is empty", hint="give a start before the end"
        )
    ordered = list(events)
    until = end_s if open_until_s is None else open_until_s
    in_window = [
        piece
        for holding in gpu_holdings(ordered, open_until_s=until)
        if (piece := clipped(holding, start_s, end_s)) is not None
    ]
    preempted = [
        event
        for event in ordered
        if event.phase is JobPhase.PREEMPTING and start_s <= event.at_s < end_s
    ]
    return UsageReport(
        start_s=start_s,
        end_s=end_s,
        days=team_days(in_window, preempted),
        jobs=job_usage(in_window),
        hours=hour_totals(in_window) if hourly else (),
    )


def gpu_holdings(events: Iterable[PhaseEvent], *, open_until_s: float) -> list[GpuHolding]:
    """Every admission's holding, per job in history order."""
    by_job: dict[JobId, list[PhaseEvent]] = defaultdict(list)
    for event in events:
        by_job[event.job].append(event)
    holdings: list[GpuHolding] = []
    for job in sorted(by_job):
        holdings.extend(_holdings_of_job(sorted(by_job[job], key=lambda e: e.seq), open_until_s))
    return holdings


def _holdings_of_job(history: Sequence[PhaseEvent], open_until_s: float) -> Iterator[GpuHolding]:
    admission: PhaseEvent | None = None
    for event in history:
        ends_holding = event.phase is JobPhase.ADMITTED or not event.phase.holds_capacity
        if admission is not None and ends_holding:
            yield _holding(admission, event.at_s)
            admission = None
        if event.phase is JobPhase.ADMITTED:
            admission = event
    if admission is not None:
        yield _holding(admission, max(open_until_s, admission.at_s))


def _holding(admission: PhaseEvent, end_s: float) -> GpuHolding:
    allocation = admission.allocation
    gpus = 0 if allocation is None else gpu_count(allocation.usage.values())
    borrowed = 0 if allocation is None else gpu_count(allocation.borrowed.values())
    return GpuHolding(
        job=admission.job,
        team=admission.team,
        start_s=admission.at_s,
        end_s=max(end_s, admission.at_s),
        gpus=gpus,
        borrowed_gpus=min(borrowed, gpus),
    )


def gpu_count(amounts: Iterable[Resources]) -> float:
    """The GPUs in ``amounts``: whole GPUs, plus shares of a GPU as their parts of one (an
    int when there are none)."""
    whole = milli = 0
    for amount in amounts:
        whole += amount.amount(NVIDIA_GPU)
        milli += amount.amount(GPU_SHARE)
    return whole + milli / GPU_MILLI_PER_GPU if milli else whole


def clipped(holding: GpuHolding, start_s: float, end_s: float) -> GpuHolding | None:
    """The part of the holding inside ``[start_s, end_s)``; an instant holding counts when it
    starts inside; None when nothing is left."""
    if holding.start_s == holding.end_s:
        return holding if start_s <= holding.start_s < end_s else None
    low, high = max(holding.start_s, start_s), min(holding.end_s, end_s)
    if low >= high:
        return None
    return GpuHolding(holding.job, holding.team, low, high, holding.gpus, holding.borrowed_gpus)


def day_pieces(holding: GpuHolding) -> Iterator[tuple[date, float]]:
    """(UTC day, seconds held that day) for every day the holding touches."""
    for start, seconds in period_pieces(holding, SECONDS_PER_DAY):
        yield utc_day(start), seconds


def period_pieces(holding: GpuHolding, period_s: float) -> Iterator[tuple[float, float]]:
    """(period's start, seconds held in it) for every period of ``period_s`` (counted from the
    epoch: UTC days, hours) the holding touches."""
    at = holding.start_s
    while True:
        start = math.floor(at / period_s) * period_s
        until = min(start + period_s, holding.end_s)
        yield start, until - at
        if until >= holding.end_s:
            return
        at = until


def hour_totals(holdings: Iterable[GpuHolding]) -> tuple[HourUsage, ...]:
    """GPU-hours per UTC hour, in guarantee and borrowed, over all ``holdings``."""
    totals: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for holding in holdings:
        for start, seconds in period_pieces(holding, SECONDS_PER_HOUR):
            hour = totals[start]
            hour[0] += (holding.gpus - holding.borrowed_gpus) * seconds
            hour[1] += holding.borrowed_gpus * seconds
    return tuple(
        HourUsage(start, guarantee_s / SECONDS_PER_HOUR, borrowed_s / SECONDS_PER_HOUR)
        for start, (guarantee_s, borrowed_s) in sorted(totals.items())
    )


def utc_day(at_s: float) -> date:
    return datetime.fromtimestamp(at_s, tz=UTC).date()


@dataclass
class _DayTotals:
    in_guarantee_s: float = 0.0
    """GPU-seconds."""
    borrowed_s: float = 0.0
    jobs: set[JobId] = field(default_factory=set)
    preemptions: int = 0


def team_days(
    holdings: Iterable[GpuHolding], preempted: Iterable[PhaseEvent]
) -> tuple[TeamDayUsage, ...]:
    totals: dict[tuple[str, date], _DayTotals] = defaultdict(_DayTotals)
    for holding in holdings:
        for day, seconds in day_pieces(holding):
            day_totals = totals[(holding.team, day)]
            day_totals.in_guarantee_s += (holding.gpus - holding.borrowed_gpus) * seconds
            day_totals.borrowed_s += holding.borrowed_gpus * seconds
            day_totals.jobs.add(holding.job)
    for event in preempted:
        totals[(event.team, utc_day(event.at_s))].preemptions += 1
    return tuple(
        TeamDayUsage(
            team=team,
            day=day,
            gpu_hours_in_guarantee=day_totals.in_guarantee_s / SECONDS_PER_HOUR,
            gpu_hours_borrowed=day_totals.borrowed_s / SECONDS_PER_HOUR,
            jobs=len(day_totals.jobs),
            preemptions=day_totals.preemptions,
        )
        for (team, day), day_totals in sorted(totals.items())
    )


def job_usage(holdings: Iterable[GpuHolding]) -> tuple[JobUsage, ...]:
    by_job: dict[tuple[str, JobId], list[GpuHolding]] = defaultdict(list)
    for holding in holdings:
        by_job[(holding.team, holding.job)].append(holding)
    return tuple(
        JobUsage(
            job=job,
            team=team,
            gpu_hours=sum(h.gpus * _seconds(h) for h in held) / SECONDS_PER_HOUR,
            gpu_hours_borrowed=sum(h.borrowed_gpus * _seconds(h) for h in held) / SECONDS_PER_HOUR,
            wall_time_s=sum(_seconds(h) for h in held),
            attempts=len(held),
        )
        for (team, job), held in sorted(by_job.items())
    )


def _seconds(holding: GpuHolding) -> float:
    return holding.end_s - holding.start_s
