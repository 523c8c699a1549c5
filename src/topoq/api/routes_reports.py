"""Reports: GPU-hours per team per UTC day (inside the guarantee and borrowed) and per job.

The arithmetic is :func:`topoq.core.usage.usage_report`; this module reads the window from
the query, gathers the phase events it needs from the store and puts the answer on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query

from topoq.api.auth import Admin, Anyone, Principal, ServiceDep, require_team
from topoq.api.errors import ApiError
from topoq.api.request_body import StrictJsonRoute
from topoq.api.service import ServiceStore
from topoq.core.usage import UsageReport, usage_report
from topoq.domain.durations import NotAMoment, moment_s
from topoq.store.codec import encode_allocation, encode_history, encode_job_spec, encode_node
from topoq.store.records import MAX_WINDOW_JOBS, JobEvent
from topoq.wire.v1 import (
    HourUsageModel,
    JobUsageModel,
    RecordedWindowModel,
    TeamDayUsageModel,
    UsageReportModel,
)
from topoq.wire.v1.cluster import PolicyVersionModel

router = APIRouter(prefix="/reports", tags=["reports"], route_class=StrictJsonRoute)

DEFAULT_WINDOW_S = 7 * 86400.0
MAX_WINDOW_S = 366 * 86400.0
MAX_HOURLY_WINDOW_S = 31 * 86400.0


@router.get("/usage", summary="GPU-hours per team per day (in guarantee and borrowed) and per job")
def usage(
    principal: Anyone,
    service: ServiceDep,
    start: Annotated[
        str | None,
        Query(alias="from", description="The window's start (inclusive); default: `to` - 7 days."),
    ] = None,
    end: Annotated[
        str | None, Query(alias="to", description="The window's end (exclusive); default: now.")
    ] = None,
    team: str | None = None,
    hourly: Annotated[
        bool,
        Query(description="Also GPU-hours per UTC hour (`hours`), for windows of 31 days at most."),
    ] = False,
) -> UsageReportModel:
    """Admins see every team (or the one asked); everyone else their own teams (403 for
    another team). A job holds the allocation its admission booked until it finishes, is
    preempted, requeued or cancelled; holdings are cut at the window and at midnight UTC (and
    every full hour, ``hourly``)."""
    now = service.clock()
    end_s = now if end is None else parse_time(end, "query.to")
    start_s = end_s - DEFAULT_WINDOW_S if start is None else parse_time(start, "query.from")
    check_window(start_s, end_s)
    if hourly and end_s - start_s > MAX_HOURLY_WINDOW_S:
        raise ApiError(
            422,
            f"an hourly report of {(end_s - start_s) / 86400:.0f} days",
            where="query.hourly",
            hint="ask for at most 31 days per hour, or leave hourly out for days",
        )
    teams = report_teams(principal, team)
    events = report_events(service.store, start_s, end_s, teams)
    report = usage_report(events, start_s, end_s, open_until_s=min(now, end_s), hourly=hourly)
    return report_model(report, teams)


@router.get("/history", summary="What the server recorded over a window, for a what-if (admin)")
def history(
    principal: Admin,
    service: ServiceDep,
    since: Annotated[str | None, Query(description="The window's start (inclusive).")] = None,
    until: Annotated[str | None, Query(description="The window's end (exclusive).")] = None,
) -> RecordedWindowModel:
    """The jobs submitted in ``[since, until)`` with their histories and what each admission
    booked, the nodes and the policy versions: what ``topoq whatif --server`` replays (every
    team's jobs, so admins only)."""
    if since is None or until is None:
        raise ApiError(
            422,
            "a what-if window needs since and until",
            where="query.since" if since is None else "query.until",
            hint="give since and until: ISO 8601 times or epoch seconds",
        )
    since_s, until_s = parse_time(since, "query.since"), parse_time(until, "query.until")
    if until_s <= since_s:
        raise ApiError(
            422, "the window ends before it starts", where="query.since", hint="give since < until"
        )
    store = service.store
    submitted = store.count_jobs_submitted_between(since_s, until_s)
    if submitted > MAX_WINDOW_JOBS:
        raise ApiError(
            422,
            f"{submitted:,} jobs were submitted in the window; a what-if replays at most "
            f"{MAX_WINDOW_JOBS:,}",
            where="query.since",
            hint="give a shorter window, or several windows one after another",
        )
    jobs = store.jobs_submitted_between(since_s, until_s)
    events = store.job_events_between(since_s, until_s)
    held = store.job_events_between(since_s, since_s, holding_at_start=True)
    span = None if jobs else store.submission_span()  # for the hint of an empty window
    return RecordedWindowModel(
        since=since_s,
        until=until_s,
        jobs=[
            {"spec": encode_job_spec(job.spec), "history": encode_history(job.history)}
            for job in jobs.values()
        ],
        booked=[
            {"job": e.job, "seq": e.seq, "allocation": encode_allocation(e.allocation)}
            for e in events
            if e.allocation is not None
        ],
        held_at_start=sorted({e.job for e in held}),
        nodes=[encode_node(node) for node in store.nodes()],
        policy_versions=[
            PolicyVersionModel(version=v.version, actor=v.actor, at=v.at_s)
            for v in store.policy_versions()
        ],
        first_submitted=span[0] if span else None,
        last_submitted=span[1] if span else None,
    )


def parse_time(text: str, where: str) -> float:
    """``durations.moment_s``, its refusal answered 422 naming the query field."""
    try:
        return moment_s(text)
    except NotAMoment as refused:
        raise ApiError(422, str(refused), where=where, hint=refused.hint) from None


def check_window(start_s: float, end_s: float) -> None:
    if end_s <= start_s:
        raise ApiError(
            422, "the window ends before it starts", where="query.from", hint="give from < to"
        )
    if end_s - start_s > MAX_WINDOW_S:
        raise ApiError(
            422,
            f"the window spans {(end_s - start_s) / 86400:.0f} days",
            where="query.from",
            hint="ask for at most 366 days at a time",
        )


def report_teams(principal: Principal, team: str | None) -> list[str] | None:
    """The teams to report on; None for every team (an admin who named none)."""
    if team is not None:
        require_team(principal, team, "see the usage of")
        return [team]
    return None if principal.is_admin else sorted(principal.teams)


def report_events(
    store: ServiceStore, start_s: float, end_s: float, teams: Sequence[str] | None
) -> list[JobEvent]:
    """The window's events, after the admission of every job that held GPUs when the window
    began (it books what the job held until its next event, which may lie past the window)."""
    return [
        event
        for chosen in ([None] if teams is None else teams)
        for event in store.job_events_between(start_s, end_s, team=chosen, holding_at_start=True)
    ]


def report_model(report: UsageReport, teams: list[str] | None) -> UsageReportModel:
    return UsageReportModel(
        start=report.start_s,
        end=report.end_s,
        teams=teams,
        days=[
            TeamDayUsageModel(
                team=day.team,
                day=day.day,
                gpu_hours_in_guarantee=_rounded(day.gpu_hours_in_guarantee),
                gpu_hours_borrowed=_rounded(day.gpu_hours_borrowed),
                jobs=day.jobs,
                preemptions=day.preemptions,
            )
            for day in report.days
        ],
        hours=[
            HourUsageModel(
                start=hour.start_s,
                gpu_hours_in_guarantee=_rounded(hour.gpu_hours_in_guarantee),
                gpu_hours_borrowed=_rounded(hour.gpu_hours_borrowed),
            )
            for hour in report.hours
        ],
        jobs=[
            JobUsageModel(
                job=job.job,
                team=job.team,
                gpu_hours=_rounded(job.gpu_hours),
                gpu_hours_borrowed=_rounded(job.gpu_hours_borrowed),
                wall_time_s=_rounded(job.wall_time_s),
                attempts=job.attempts,
            )
            for job in report.jobs
        ],
    )


def _rounded(value: float) -> float:
    """Six decimals: a GPU-second is 0.000278 GPU-hours; float noise stays off the wire."""
    return round(value, 6)
