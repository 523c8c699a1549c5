"""The queue in scheduling order (``GET /queue``, ``topoq queue``, the dashboard's queue): the
waiting jobs in the order the next cycle would give them their turns (``core.cycle.queue``),
worked out again only when the store's change marks moved or a little time passed, so that
dashboards polling it do not each order 10,000 jobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topoq.api.auth import Principal
from topoq.api.explain import snapshot_now, with_waits
from topoq.api.service import Service
from topoq.core.cycle import queue_order
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.wire.v1 import QueueEntry, QueueList
from topoq.wire.v1.convert import job_summary, topology_asked

ORDER_MAX_AGE_S = 2.0
"""How long an order is served while nothing was written: time alone moves the starvation
guard and the teams' decayed usage."""


@dataclass
class QueueOrder:
    """The waiting jobs (by id) and the positions of those in line."""

    waiting: Mapping[JobId, JobView]
    position: Mapping[JobId, int]


def latest_order(service: Service) -> QueueOrder:
    """The queue's order now, kept while nothing was written (``Service.kept``)."""

    def work() -> QueueOrder:
        snapshot = snapshot_now(service)
        return QueueOrder(
            {job.id: job for job in snapshot.jobs if job.phase is JobPhase.PENDING},
            {job_id: index + 1 for index, job_id in enumerate(queue_order(snapshot))},
        )

    return service.kept("queue-order", work, ORDER_MAX_AGE_S)


def queue_page(
    service: Service,
    principal: Principal,
    *,
    team: str | None,
    limit: int,
    offset: int,
) -> QueueList:
    """The waiting jobs (of ``team``, if given) in line first, by position, then the others,
    oldest first; ``limit`` of them from ``offset``."""
    order = latest_order(service)
    waiting = [job for job in order.waiting.values() if team is None or job.team == team]
    position = order.position
    in_line = sorted((job for job in waiting if job.id in position), key=lambda j: position[j.id])
    others = sorted(
        (job for job in waiting if job.id not in order.position),
        key=lambda job: (job.spec.submitted_at, job.id),
    )
    page = [*in_line, *others][offset : offset + limit]
    return QueueList(
        items=with_waits(service, [(view, _entry(view, order, principal)) for view in page]),
        total=len(waiting),
        in_line=len(in_line),
        limit=limit,
        offset=offset,
    )


def _entry(view: JobView, order: QueueOrder, principal: Principal) -> QueueEntry:
    visible = principal.acts_for(view.team)
    return QueueEntry(
        **dict(job_summary(view, visible=visible)),
        position=order.position.get(view.id),
        topology=topology_asked(view.spec) if visible else None,
    )
