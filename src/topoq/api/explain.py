"""Why a job waits: the diagnostic of the latest cycle that considered it (a wait that keeps
its reason keeps its message and numbers, ADR 0007), or — asked ``fresh``, or before any
cycle has — a read-only scheduling cycle on the current state up to the job's turn, which
gives them as they are now (nothing of it is committed; the controller's own next cycle
decides). Under fair share, a pending job's
explanation also shows each team's standing: borrowed share now, decayed usage, weight and
position."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from topoq.api.service import Service
from topoq.core.cycle import Snapshot, schedule_until
from topoq.core.dependencies import dependency_status
from topoq.core.eta import ETA_KEY
from topoq.core.fair_share import estimated_usage, kept_half_life_s, standings
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import CycleResult, Diagnostic
from topoq.domain.governance import ClusterPolicy, IdleAllocation, TeamName
from topoq.domain.job import DependencyStatus, JobPhase, JobView
from topoq.engine.upstream import upstream_phases
from topoq.wire.v1 import (
    DependencyModel,
    DependencyStatusModel,
    Explanation,
    FairShareStandingModel,
    JobSummary,
)

MAX_STANDINGS = 50
"""Teams listed in a fair-share section at most (the job's own team always among them)."""


def explain_job(service: Service, view: JobView, *, fresh: bool = False) -> Explanation:
    """Why the job waits (or what it does), with where each of its dependencies stands."""
    explanation = _explanation(service, view, fresh=fresh)
    if not view.spec.dependencies:
        return explanation
    return explanation.model_copy(update={"dependencies": dependency_statuses(service, view)})


def dependency_statuses(service: Service, view: JobView) -> list[DependencyStatusModel]:
    """Each dependency of the job with its upstream job's phase now (one store query)."""
    phases = service.store.phases_of({dep.job for dep in view.spec.dependencies})
    return [
        DependencyStatusModel(
            kind=dep.kind,
            job=dep.job,
            phase=phases.get(dep.job),
            status=dependency_status(dep, phases.get(dep.job)),
        )
        for dep in view.spec.dependencies
    ]


Row = TypeVar("Row", bound=JobSummary)


def with_waits(service: Service, rows: Sequence[tuple[JobView, Row]]) -> list[Row]:
    """Each row, a pending job the caller sees with why it waits (``reason``, ``waitingOn``,
    ``etaAt``) as its latest cycle left it: two store queries for the whole page, however
    many jobs wait, instead of an ``explain`` per job."""
    waiting = [view for view, row in rows if row.visible and view.phase is JobPhase.PENDING]
    if not waiting:
        return [row for _, row in rows]
    diagnostics = service.store.diagnostics([view.id for view in waiting])
    upstream = service.store.phases_of({d.job for v in waiting for d in v.spec.dependencies})
    answered = []
    for view, row in rows:
        if not row.visible or view.phase is not JobPhase.PENDING:
            answered.append(row)
            continue
        diagnostic = diagnostics.get(view.id)
        still_open = [
            DependencyModel(kind=dep.kind, job=dep.job)
            for dep in view.spec.dependencies
            if dependency_status(dep, upstream.get(dep.job)) is DependencyStatus.OPEN
        ]
        answered.append(
            row.model_copy(
                update={
                    "reason": None if diagnostic is None else diagnostic.reason.value,
                    "waiting_on": still_open,
                    "eta_at": eta_of(diagnostic),
                    "reason_message": None if diagnostic is None else diagnostic.message,
                }
                | _remedies(row, diagnostic)
            )
        )
    return answered


def _remedies(row: JobSummary, diagnostic: Diagnostic | None) -> dict[str, list[str]]:
    """What would let the job start, for a row that has room for it (a queue's)."""
    if "remedies" not in type(row).model_fields:
        return {}
    return {"remedies": [] if diagnostic is None else list(diagnostic.remedies)}


def _explanation(service: Service, view: JobView, *, fresh: bool) -> Explanation:
    if view.phase is not JobPhase.PENDING:
        return _not_waiting(view)
    policy = service.store.policy() or ClusterPolicy()
    tree = service.tree()
    now = service.clock()
    fair = policy.idle_allocation is IdleAllocation.FAIR_SHARE
    holders = list(service.store.holding_jobs().values()) if fair else []
    usage_stored = service.store.fair_share_usage() if kept_half_life_s(policy) > 0 else {}
    usage = estimated_usage(policy, tree, holders, usage_stored, now)
    fair_share = _fair_share(policy, tree, holders, usage, view.team) if fair else []
    stored = None if fresh else service.store.diagnostic(view.id)
    if stored is not None:
        return _waiting(view, stored, fair_share)
    snapshot = snapshot_now(service)
    with service.cycle_lock:  # the cycle places on the tree, which other requests share
        result = schedule_until(snapshot, view.id)
    diagnostic = next((d for d in result.diagnostics if d.job == view.id), None)
    if diagnostic is not None:
        return _waiting(view, diagnostic, fair_share)
    message = _undiagnosed(view, result)
    return Explanation(job=view.id, phase=view.phase, message=message, fair_share=fair_share)


def snapshot_now(service: Service) -> Snapshot:
    """What a cycle would look at now: the unfinished jobs, the tree, the policy, the phases of
    finished jobs waited on, and each team's decayed usage."""
    store = service.store
    policy = store.policy() or ClusterPolicy()
    tree = service.tree()
    now = service.clock()
    jobs = tuple(store.jobs().values())
    holders = [job for job in jobs if job.phase.holds_capacity]
    stored = store.fair_share_usage() if kept_half_life_s(policy) > 0 else {}
    usage = estimated_usage(policy, tree, holders, stored, now)
    upstream = upstream_phases(store, jobs)
    return Snapshot(now, tree, jobs, policy, upstream_phases=upstream, fair_share_usage=usage)


def _fair_share(
    policy: ClusterPolicy,
    tree: TopologyTree,
    holders: Sequence[JobView],
    usage: Mapping[TeamName, float],
    team: TeamName,
) -> list[FairShareStandingModel]:
    rows = standings(policy, tree, holders, usage, also=[team])
    shown = rows[:MAX_STANDINGS]
    own = [row for row in rows[MAX_STANDINGS:] if row.team == team]
    if own:  # the job's team (when the policy has it) is always listed
        shown[-1:] = own
    return [
        FairShareStandingModel(
            team=row.team,
            weight=row.weight,
            borrowed_share=row.borrowed_now,
            usage=row.usage,
            position=None if math.isinf(row.position) else row.position,
        )
        for row in shown
    ]


def _waiting(
    view: JobView, diagnostic: Diagnostic, fair_share: list[FairShareStandingModel]
) -> Explanation:
    return Explanation(
        job=view.id,
        phase=view.phase,
        reason=diagnostic.reason.value,
        message=diagnostic.message,
        numbers=dict(diagnostic.numbers),
        remedies=list(diagnostic.remedies),
        eta_at=eta_of(diagnostic),
        fair_share=fair_share,
    )


def eta_of(diagnostic: Diagnostic | None) -> float | None:
    """The expected start a cycle gave a waiting job, if any (``topoq.core.eta``)."""
    value = diagnostic.numbers.get(ETA_KEY) if diagnostic is not None else None
    return float(value) if isinstance(value, int | float) else None


def _undiagnosed(view: JobView, result: CycleResult) -> str:
    if any(admit.job == view.id for admit in result.admissions):
        return "it fits now: the next cycle admits it"
    victims = [p.victim for p in result.preemptions if p.for_job == view.id]
    if victims:
        return f"the next cycle preempts {', '.join(victims)} to make room for it"
    return "it is about to be considered by the next cycle"


def _not_waiting(view: JobView) -> Explanation:
    last = view.history[-1] if view.history else None
    said = last is None or last.cause in (view.phase.value, "started")
    cause = "" if said or last is None else f" ({last.cause})"
    messages = {
        JobPhase.ADMITTED: "admitted, waiting for the executor to start every pod",
        JobPhase.RUNNING: "running",
    }
    text = messages.get(view.phase, view.phase.value)
    numbers: dict[str, int | str] = {}
    if view.preempting_since is not None:
        since = datetime.fromtimestamp(view.preempting_since, UTC).isoformat(timespec="seconds")
        whom = f" for {view.preempted_for}" if view.preempted_for else ""
        text = (
            f"preempted{whom} since {since}: its pods are being stopped (SIGTERM, then SIGKILL "
            "after the policy's grace period) and keep their room until they are gone; then it "
            "goes back to the queue"
        )
        numbers = {"preempted_for": view.preempted_for or "", "preempting_since": since}
    if view.allocation is not None:
        text += f" on {len(view.allocation.nodes)} node(s)"
    return Explanation(job=view.id, phase=view.phase, message=f"{text}{cause}", numbers=numbers)
