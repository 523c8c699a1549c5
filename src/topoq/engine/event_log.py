"""The server log's events: one record per thing that happened (an admission, a preemption, a
requeue, a job's end, a node marked, the inventory changed, a new policy version), derived from
what the controller or the intake stored, never from what they were about to do.

The builders here are pure (they return a ``ServerEvent``); ``write_events`` hands events to
a ``logging`` logger with the event's name and fields on the record (``EVENT_ATTRIBUTE``,
``FIELDS_ATTRIBUTE``), which ``topoq.server_log`` renders as text or JSON. Field names never
take the keys every JSON line has (``RESERVED_KEYS``). docs/operations.md lists the events."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from topoq.domain.decisions import CycleResult, Preempt
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import NodeSpec
from topoq.domain.placement import placement_span
from topoq.domain.quantity import NVIDIA_GPU

EVENT_ATTRIBUTE = "topoq_event"
FIELDS_ATTRIBUTE = "topoq_fields"
RESERVED_KEYS = frozenset({"time", "level", "logger", "event", "message", "traceback"})
MAX_LISTED_NODES = 20
"""Node names an inventory change lists (the counts say how many changed)."""

FieldValue = str | int | float | bool | None | Sequence[str] | Mapping[str, int]


@dataclass(frozen=True)
class ServerEvent:
    name: str
    message: str
    fields: Mapping[str, FieldValue] = field(default_factory=dict)
    level: int = logging.INFO


def write_events(logger: logging.Logger, events: Iterable[ServerEvent]) -> None:
    for event in events:
        write_event(logger, event)


def write_event(
    logger: logging.Logger, event: ServerEvent, *, exc_info: BaseException | None = None
) -> None:
    """One record (``exc_info``: an error whose traceback goes with it, into the log only)."""
    extra = {EVENT_ATTRIBUTE: event.name, FIELDS_ATTRIBUTE: dict(event.fields)}
    logger.log(event.level, event.message, extra=extra, exc_info=exc_info)


# --- jobs ---------------------------------------------------------------------------------
def cycle_events(
    result: CycleResult,
    before: Mapping[JobId, JobView],
    after: Mapping[JobId, JobView],
    policy: ClusterPolicy,
) -> list[ServerEvent]:
    """What a stored cycle did: its requeues, cancellations, preemptions and admissions
    (``before``: the jobs the cycle saw; ``after``: the jobs its decisions moved, as stored)."""
    events: list[ServerEvent] = []
    for requeue in result.requeues:
        job = after[requeue.job]
        events.append(requeued(job, requeue.message, reason=requeue.cause.value))
    for cancel in result.cancellations:
        events.append(job_ended(after[cancel.job], cause=cancel.message))
    for preempt in result.preemptions:
        events.append(preempted(preempt, before[preempt.victim], before[preempt.for_job]))
    for admit in result.admissions:
        events.append(admitted(after[admit.job], policy))
    return events


def admitted(job: JobView, policy: ClusterPolicy) -> ServerEvent:
    allocation = job.allocation
    nodes = allocation.nodes if allocation is not None else frozenset()
    gpus = (
        sum(amounts.amount(NVIDIA_GPU) for amounts in allocation.resources_on_node.values())
        if allocation is not None
        else 0
    )
    span = level_span(placement_span(allocation.placement)) if allocation is not None else {}
    return ServerEvent(
        "admitted",
        f"admitted {job.id} of team {job.spec.team} on {len(nodes)} nodes",
        {
            "job": job.id,
            "team": job.spec.team,
            "priority": policy.priority_of(job.spec.priority_class),
            "priority_class": job.spec.priority_class,
            "gpus": gpus,
            "nodes": len(nodes),
            "span": span,
            "borrowed": bool(allocation is not None and any(allocation.borrowed.values())),
            "attempt": job.attempt,
        },
    )


def preempted(preempt: Preempt, victim: JobView, preemptor: JobView) -> ServerEvent:
    return ServerEvent(
        "preempted",
        f"preempting {victim.id} of team {victim.spec.team} for {preemptor.id} of team "
        f"{preemptor.spec.team}",
        {
            "victim": victim.id,
            "victim_team": victim.spec.team,
            "preemptor": preemptor.id,
            "preemptor_team": preemptor.spec.team,
            "reason": preempt.cause.value,
            "cause": preempt.message,
        },
    )


def requeued(job: JobView, cause: str, *, reason: str | None = None) -> ServerEvent:
    return ServerEvent(
        "requeued",
        f"requeued {job.id} of team {job.spec.team}: {cause}",
        {
            "job": job.id,
            "team": job.spec.team,
            "reason": reason,
            "cause": cause,
            "failures": job.failures,
        },
    )


def job_ended(job: JobView, *, cause: str, exit_code: int | None = None) -> ServerEvent:
    outcome = job.phase.value
    return ServerEvent(
        "job_ended",
        f"{job.id} of team {job.spec.team} {outcome}: {cause}",
        {
            "job": job.id,
            "team": job.spec.team,
            "outcome": outcome,
            "exit_code": exit_code,
            "cause": cause,
            "attempt": job.attempt,
        },
        logging.WARNING if job.phase is JobPhase.FAILED else logging.INFO,
    )


def job_started(job: JobView) -> ServerEvent:
    nodes = len(job.allocation.nodes) if job.allocation is not None else 0
    return ServerEvent(
        "job_started",
        f"{job.id} of team {job.spec.team} runs",
        {"job": job.id, "team": job.spec.team, "nodes": nodes, "attempt": job.attempt},
    )


def moved(before: JobView, after: JobView, *, exit_code: int | None = None) -> ServerEvent | None:
    """The event of one stored move of a job outside a cycle (an executor's outcome, a time
    limit, a victim killed, a restart), or None for a move the log does not tell."""
    cause = after.history[-1].cause if after.history else ""
    if after.phase.finished:
        return job_ended(after, cause=cause, exit_code=exit_code)
    if after.phase is JobPhase.PENDING and before.phase is not JobPhase.PENDING:
        return requeued(after, cause)
    if after.phase is JobPhase.RUNNING and before.phase is not JobPhase.RUNNING:
        return job_started(after)
    return None


def level_span(span: Mapping[str, int]) -> dict[str, int]:
    """A span keyed by each level's short name (``network-node-layer-3`` for
    ``topology.k8s.aws/network-node-layer-3``) where those names are unique."""
    short = {label: label.rsplit("/", 1)[-1] for label in span}
    if len(set(short.values())) < len(short):
        return dict(span)
    return {short[label]: count for label, count in span.items()}


# --- nodes and policy ---------------------------------------------------------------------
def node_marked(
    node: NodeSpec, *, ready: bool | None, unschedulable: bool | None, actor: str
) -> ServerEvent:
    """A node's health or cordon state set (by a user, or by the controller for a lost node)."""
    if ready is not None:
        name = "node_recovered" if ready else "node_failed"
    else:
        name = "node_cordoned" if unschedulable else "node_uncordoned"
    what = name.removeprefix("node_")
    return ServerEvent(
        name,
        f"node {node.name} {what} by {actor}",
        {
            "node": node.name,
            "actor": actor,
            "ready": node.ready,
            "schedulable": not node.unschedulable,
        },
        logging.WARNING if name == "node_failed" else logging.INFO,
    )


def node_drained(name: str, requeued_jobs: Sequence[JobId], *, actor: str) -> ServerEvent:
    return ServerEvent(
        "node_drained",
        f"node {name} drained by {actor}: {len(requeued_jobs)} gangs requeued",
        {"node": name, "actor": actor, "requeued": list(requeued_jobs)},
    )


def inventory_changed(
    stored: Iterable[NodeSpec], reported: Iterable[NodeSpec]
) -> ServerEvent | None:
    """The nodes an executor's report added, removed or changed, or None when it changed
    nothing."""
    before = {node.name: node for node in stored}
    after = {node.name: node for node in reported}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(name for name in set(after) & set(before) if after[name] != before[name])
    if not (added or removed or changed):
        return None
    return ServerEvent(
        "inventory_changed",
        f"the executor reported {len(after)} nodes: {len(added)} added, {len(removed)} "
        f"removed, {len(changed)} changed",
        {
            "nodes": len(after),
            "added": len(added),
            "removed": len(removed),
            "changed": len(changed),
            "names": [*added, *removed, *changed][:MAX_LISTED_NODES],
        },
    )


def policy_changed(version: int, actor: str) -> ServerEvent:
    return ServerEvent(
        "policy_changed",
        f"policy version {version} set by {actor}",
        {"version": version, "actor": actor},
    )
