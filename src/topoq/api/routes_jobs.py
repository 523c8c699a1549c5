"""Job routes: submit, list, get, cancel, hold, release, explain, history, logs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from topoq.api.auth import Anyone, JobWriter, Principal, ServiceDep, require_team
from topoq.api.errors import ApiError, conflict
from topoq.api.explain import explain_job, with_waits
from topoq.api.log_query import LogQuery, log_request
from topoq.api.request_body import StrictJsonRoute
from topoq.api.service import Service
from topoq.api.submission import job_from_request
from topoq.api.submission_warnings import refuse_unshareable, unrun_images
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.limits import MAX_LOG_READ_BYTES
from topoq.engine.ports import JobLog, UnknownJob
from topoq.wire.v1 import (
    Explanation,
    JobDetail,
    JobHistory,
    JobList,
    JobLogs,
    PodLogModel,
    SubmitJobRequest,
)
from topoq.wire.v1.convert import history_models, job_detail, job_summary

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=StrictJsonRoute)

MAX_PAGE = 1000
MAX_OFFSET = 1_000_000_000
"""Far past any store's job count, and inside the 64-bit integers databases take."""
MAX_LOG_OFFSET = 1 << 62
MAX_ATTEMPT = 1_000_000
MAX_TAIL_LINES = 1_000_000


@router.post("", status_code=201, summary="Submit a job")
def submit_job(body: SubmitJobRequest, principal: JobWriter, service: ServiceDep) -> JobDetail:
    """Submit a topoq job file, a HyperPod PyTorch job or a Kueue Workload (422 naming the
    field when it cannot be scheduled as written; 409 when the id is taken). The answer's
    `warnings` say what of an accepted job the server will not do (an image its executor
    does not run)."""
    spec = job_from_request(
        body,
        policy=service.store.policy(),
        topology=service.topology,
        largest_node=service.node_sizes.largest(),
        user=principal.name,
        now=service.clock(),
        stored_phases=service.store.phases_of,
    )
    require_team(principal, spec.team, "submit")
    service.limits.check(spec)  # a job the cluster could never hold is refused, naming why
    refuse_unshareable(spec.workload, service.executor)
    warnings = unrun_images(spec.workload, service.executor)
    view = service.intake.submit(spec, actor=principal.name, warnings=warnings)
    service.wake()
    return job_detail(view).model_copy(update={"warnings": warnings})


@router.get("", summary="List jobs")
def list_jobs(
    principal: Anyone,
    service: ServiceDep,
    team: str | None = None,
    phase: JobPhase | None = None,
    user: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> JobList:
    """Newest first. Jobs of teams the token does not act for show id, team, phase and GPUs
    only; filtering by user shows only jobs the token may see in full. A pending job the
    token sees carries why it waits (``reason``, ``waitingOn``, ``etaAt``), as its latest
    cycle left it."""
    teams: str | list[str] | None = team
    if user is not None and not principal.is_admin:
        teams = [t for t in principal.teams if team is None or t == team]
    store = service.store
    views = store.list_jobs(team=teams, phase=phase, user=user, limit=limit, offset=offset)
    return JobList(
        items=with_waits(
            service,
            [(view, job_summary(view, visible=principal.acts_for(view.team))) for view in views],
        ),
        total=store.count_jobs(team=teams, phase=phase, user=user),
        limit=limit,
        offset=offset,
    )


@router.get("/{job_id}", summary="One job in full")
def get_job(job_id: str, principal: Anyone, service: ServiceDep) -> JobDetail:
    view = _visible_job(service, principal, job_id, "see")
    [detail] = with_waits(service, [(view, job_detail(view))])
    return detail


@router.post("/{job_id}/cancel", summary="Cancel a job")
def cancel_job(job_id: str, principal: JobWriter, service: ServiceDep) -> JobDetail:
    """409 when the job has already ended."""
    _visible_job(service, principal, job_id, "cancel")
    try:
        view = service.intake.cancel(JobId(job_id), actor=principal.name)
    except InvalidInputError as error:
        raise conflict(error) from None
    service.wake()
    return job_detail(view)


@router.post("/{job_id}/hold", summary="Hold a pending job")
def hold_job(job_id: str, principal: JobWriter, service: ServiceDep) -> JobDetail:
    """A held job stays pending until released (409 unless it is pending)."""
    return job_detail(_set_held(service, principal, job_id, held=True))


@router.post("/{job_id}/release", summary="Release a held job")
def release_job(job_id: str, principal: JobWriter, service: ServiceDep) -> JobDetail:
    return job_detail(_set_held(service, principal, job_id, held=False))


@router.get("/{job_id}/explain", summary="Why a job waits (or what it is doing)")
def explain(
    job_id: str,
    principal: Anyone,
    service: ServiceDep,
    fresh: Annotated[
        bool,
        Query(
            description="work the wait out afresh (a read-only cycle up to the job's turn) "
            "instead of answering with the latest cycle's diagnostic"
        ),
    ] = False,
) -> Explanation:
    """For a pending job: the reason, its message, the numbers behind it and what would
    change it — as the latest cycle left them (a wait that keeps its reason keeps its message
    and numbers, ADR 0007), or with ``fresh`` as they are now."""
    view = _visible_job(service, principal, job_id, "see")
    return explain_job(service, view, fresh=fresh)


@router.get("/{job_id}/history", summary="A job's phase changes")
def history(job_id: str, principal: Anyone, service: ServiceDep) -> JobHistory:
    view = _visible_job(service, principal, job_id, "see")
    return JobHistory(job=view.id, history=history_models(view.history))


@router.get("/{job_id}/logs", summary="A job's captured output, a bounded piece at a time")
def logs(
    job_id: str,
    principal: Anyone,
    service: ServiceDep,
    pod: Annotated[
        int | None, Query(ge=0, description="One pod's rank; all pods if left out.")
    ] = None,
    tail_bytes: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_LOG_READ_BYTES,
            description="Return the last this many bytes (default 1 MiB, shared between the "
            "pods when reading all of them; at most 16 MiB).",
        ),
    ] = None,
    offset: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_LOG_OFFSET,
            description="Read one pod's log (needs `pod`) forward from this stream offset "
            "(bytes since the pod's first; a rotation does not move them): a previous "
            "answer's `nextOffset`.",
        ),
    ] = None,
    limit_bytes: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_LOG_READ_BYTES,
            description="With a forward read (`offset`, or `since` without `tail_lines`): "
            "return at most this many bytes (default 1 MiB).",
        ),
    ] = None,
    attempt: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_ATTEMPT,
            description="Read this attempt's logs (from 1; default: the newest). 422 when it "
            "has none.",
        ),
    ] = None,
    tail_lines: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_TAIL_LINES,
            description="Return only the last this many lines of each pod (within the byte "
            "cap of `tail_bytes`).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Only output written since then, from a line start: a duration before "
            "now (`90s`, `10m`, `2h`), an ISO time (UTC when it names no zone) or seconds since "
            "the epoch. As precise as the executor's record of when output was written (the "
            "local executor marks each log about once a second), so it may show up to a second "
            "of earlier output, never less than asked. Without `tail_lines`, a forward read: "
            "go on from `nextOffset`.",
        ),
    ] = None,
) -> JobLogs:
    """One attempt's output (the newest by default): the tail of every pod's log or of one
    pod's (in bytes or lines), one pod's log from an offset on, or what was written since a
    time. The answer says which attempt it read, the newest one, whether it was cut and where
    to read on."""
    view = _visible_job(service, principal, job_id, "see")
    query = LogQuery(pod, tail_bytes, offset, limit_bytes, attempt, tail_lines, since)
    request = log_request(view, query, service.clock())
    if service.logs is None:
        raise ApiError(404, "this server keeps no logs", hint="its executor captures none")
    try:
        read = service.logs(request)
    except UnknownJob as error:  # the executor never ran it
        raise ApiError(404, str(error), hint="a job has logs once it has started") from None
    return _job_logs(read)


def _job_logs(read: JobLog) -> JobLogs:
    pods = [
        PodLogModel(
            pod=p.rank,
            pod_set=p.pod_set,
            node=p.node,
            offset=p.offset,
            next_offset=p.next_offset,
            size_bytes=p.size_bytes,
            truncated=p.truncated,
        )
        for p in read.pods
    ]
    return JobLogs(
        job=read.job,
        pod=read.pod,
        attempt=read.attempt,
        latest_attempt=max(read.attempt, read.latest_attempt),
        text=read.text,
        truncated=read.truncated,
        pods=pods,
    )


def _visible_job(service: Service, principal: Principal, job_id: str, action: str) -> JobView:
    """The job (404 if unknown), if the principal acts for its team (403 otherwise)."""
    view = service.store.job(JobId(job_id))
    require_team(principal, view.team, action)
    return view


def _set_held(service: Service, principal: Principal, job_id: str, *, held: bool) -> JobView:
    _visible_job(service, principal, job_id, "hold" if held else "release")
    try:
        view = service.intake.set_held(JobId(job_id), held, actor=principal.name)
    except InvalidInputError as error:
        raise conflict(error) from None
    service.wake()
    return view
