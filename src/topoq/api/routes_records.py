"""Records and access: job events, the audit log, tokens, who am I, and health; the queue in
scheduling order and the mark of what changed, which views poll."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from prometheus_client import CONTENT_TYPE_LATEST

from topoq import __version__
from topoq.api.auth import Admin, Anyone, ServiceDep, require_team
from topoq.api.queue import queue_page
from topoq.api.request_body import StrictJsonRoute
from topoq.wire.v1 import (
    AuditEntryModel,
    ChangesModel,
    EventModel,
    Health,
    QueueList,
)

router = APIRouter(tags=["records"], route_class=StrictJsonRoute)
health_router = APIRouter(tags=["health"], route_class=StrictJsonRoute)

MAX_RECORDS = 1000
MAX_EVENT_AGE_S = 30 * 86400.0
MAX_QUEUE_OFFSET = 1_000_000_000


@health_router.get("/healthz", summary="Liveness (no token needed)")
def healthz() -> Health:
    return Health(status="ok", version=__version__)


@health_router.get("/metrics", include_in_schema=False)
def metrics(service: ServiceDep) -> Response:
    """Prometheus metrics (no token needed, like /healthz; scrape it from inside the cluster).
    The controller labels them by team, phase, kind, cause and level at most — never a job, a
    user or a node — so an open route shows only what every team's tokens may see."""
    if service.metrics is None:
        return Response("metrics are not enabled\n", status_code=404, media_type="text/plain")
    return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get("/queue", summary="The waiting jobs in scheduling order")
def queue(
    principal: Anyone,
    service: ServiceDep,
    team: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RECORDS)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_QUEUE_OFFSET)] = 0,
) -> QueueList:
    """Every team's waiting jobs (or ``team``'s) in the order the next cycle would give them
    their turns, as the books stand: first those that fit their team's guarantee, then by
    priority, fair-share position and submission, each team's own jobs in its order. Then the
    jobs not in line (held by a user, waiting on another job). Jobs of teams the token does
    not act for show id, team, GPUs and position only; the others carry why they wait and
    what would let them start, as their latest cycle left it."""
    return queue_page(service, principal, team=team, limit=limit, offset=offset)


@router.get("/changes", summary="A mark that moves when anything a view shows changed")
def changes(principal: Anyone, service: ServiceDep) -> ChangesModel:
    """One cheap statement: a dashboard polls it every second and reads its views again only
    when the mark moved. It tells that something changed, never what or whose."""
    return ChangesModel(mark=".".join(map(str, service.store.change_marks())))


@router.get("/events", summary="Recent job phase changes, newest first")
def events(
    principal: Anyone,
    service: ServiceDep,
    team: str | None = None,
    since_s: Annotated[float, Query(gt=0, le=MAX_EVENT_AGE_S)] = 3600.0,
    limit: Annotated[int, Query(ge=1, le=MAX_RECORDS)] = 100,
) -> list[EventModel]:
    """Phase changes of the last ``since_s`` seconds: of the token's teams' jobs (every
    team's for admins)."""
    if team is not None:
        require_team(principal, team, "see the events of")
    now = service.clock()
    store = service.store
    if team is None and principal.is_admin:
        found = store.job_events_between(now - since_s, now + 1)
    else:
        teams = [team] if team is not None else sorted(principal.teams)
        found = [e for t in teams for e in store.job_events_between(now - since_s, now + 1, team=t)]
    found.sort(key=lambda e: (e.at_s, e.seq), reverse=True)
    return [
        EventModel(at=e.at_s, job=e.job, team=e.team, phase=e.phase, cause=e.cause)
        for e in found[:limit]
    ]


@router.get("/audit", summary="The audit log, newest first (admin)")
def audit(
    principal: Admin,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=MAX_RECORDS)] = 100,
    since_s: Annotated[
        float | None,
        Query(
            gt=0,
            allow_inf_nan=False,
            description="Only entries of the last this many seconds.",
        ),
    ] = None,
    actor: Annotated[str | None, Query(description="Only entries by this token name.")] = None,
) -> list[AuditEntryModel]:
    since = None if since_s is None else service.clock() - since_s
    return [
        AuditEntryModel(
            at=entry.at_s,
            actor=entry.actor,
            action=entry.action,
            target=entry.target,
            detail=dict(entry.detail),
        )
        for entry in service.store.audit_log(limit=limit, since_s=since, actor=actor)
    ]
