"""What users ask of the control plane, written to the store: submit, cancel, hold and release
a job; cordon, uncordon, fail, recover and drain a node.

Nothing here touches an executor. The controller — in its own process, see
docs/adr/0004-controller-process.md — reconciles the executor with what the store says at the
start of its next step: pods of a job that no longer holds capacity are stopped, a node newly
marked failed has its work stopped. So the API can run anywhere the store is reachable, and a
request that raced a controller step is retried on fresh state rather than lost or applied to a
stale copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from topoq.core.lifecycle import advance
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView
from topoq.domain.node import NodeSpec
from topoq.engine.event_log import (
    job_ended,
    node_drained,
    node_marked,
    requeued,
    write_event,
    write_events,
)
from topoq.engine.ports import AuditEntry, ConcurrentUpdate, Store

log = logging.getLogger(__name__)

SYSTEM = "topoq"
"""The actor of changes the control plane makes itself."""
MAX_ATTEMPTS = 5
"""How often a change that raced another writer (a controller step) is redone on fresh state."""

T = TypeVar("T")


class Intake:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    # --- jobs ---------------------------------------------------------------------------
    def submit(self, spec: JobSpec, *, actor: str, warnings: Sequence[str] = ()) -> JobView:
        """Store the job as pending (its submit time is now); its audit entry keeps the
        ``warnings`` the submitter was given. Raises DuplicateJob."""
        now = self.clock()
        detail: dict[str, object] = {"team": spec.team}
        if warnings:
            detail["warnings"] = list(warnings)
        entry = AuditEntry(now, actor, "submit", spec.id, detail)
        return self.store.add_job(
            replace(spec, submitted_at=now), actor=actor, now=now, audit=entry
        )

    def cancel(self, job_id: JobId, *, actor: str) -> JobView:
        """The job ends cancelled; its pods, if any, stop at the controller's next step.
        Raises InvalidInputError when it has already ended, UnknownJob when there is none."""

        def attempt() -> JobView:
            now = self.clock()
            job = self.store.job(job_id)
            if job.phase.finished:
                raise InvalidInputError(
                    f"job {job_id} already ended {job.phase.value}",
                    hint="only pending, admitted or running jobs can be cancelled",
                )
            cancelled = advance(job, JobPhase.CANCELLED, now=now, cause=f"cancelled by {actor}")
            self.store.save_jobs([cancelled], now=now)
            return cancelled

        cancelled = redo_on_conflict(attempt)
        write_event(log, job_ended(cancelled, cause=f"cancelled by {actor}"))
        self.store.audit(AuditEntry(self.clock(), actor, "cancel", job_id))
        return cancelled

    def set_held(self, job_id: JobId, held: bool, *, actor: str) -> JobView:
        """Hold (or release) a pending job. Raises InvalidInputError unless it is pending."""

        def attempt() -> JobView:
            job = self.store.job(job_id)
            if job.phase is not JobPhase.PENDING:
                raise InvalidInputError(
                    f"job {job_id} is {job.phase.value}",
                    hint="only pending jobs can be held or released",
                )
            changed = replace(job, held=held)
            self.store.save_jobs([changed], now=self.clock())
            return changed

        changed = redo_on_conflict(attempt)
        self.store.audit(AuditEntry(self.clock(), actor, "hold" if held else "release", job_id))
        return changed

    # --- nodes --------------------------------------------------------------------------
    def mark_node(
        self, name: str, *, ready: bool | None = None, unschedulable: bool | None = None, actor: str
    ) -> NodeSpec:
        """Set a node's health (``ready``) and cordon state (``unschedulable``): one write of
        the fields given, so that concurrent actions on other nodes (or on the other field)
        stick too. A node marked not ready is failed: the controller stops its work and
        requeues the gangs on it. Raises InvalidInputError when there is no such node."""
        updated = self._mark_node(name, ready=ready, unschedulable=unschedulable, actor=actor)
        event = node_marked(updated, ready=ready, unschedulable=unschedulable, actor=actor)
        write_event(log, event)
        return updated

    def _mark_node(
        self, name: str, *, ready: bool | None, unschedulable: bool | None, actor: str
    ) -> NodeSpec:
        now = self.clock()
        updated = self.store.update_node(name, ready=ready, unschedulable=unschedulable, now=now)
        if updated is None:
            raise InvalidInputError(f"no node named {name!r}", hint="see `topoq nodes`")
        state = {"ready": updated.ready, "unschedulable": updated.unschedulable}
        self.store.audit(AuditEntry(now, actor, "node", name, state))
        return updated

    def drain(self, name: str, *, actor: str) -> list[JobId]:
        """Cordon the node and send every gang holding capacity on it back to the queue (their
        pods stop at the controller's next step). Returns the requeued jobs."""
        self._mark_node(name, ready=None, unschedulable=True, actor=actor)
        cause = f"node {name} was drained by {actor}; the gang is requeued"

        def attempt() -> list[JobView]:
            now = self.clock()
            moved = [
                advance(job, JobPhase.PENDING, now=now, cause=cause)
                for job in self.store.holding_jobs().values()
                if job.allocation is not None and name in job.allocation.nodes
            ]
            if moved:
                self.store.save_jobs(moved, now=now)
            return moved

        moved = redo_on_conflict(attempt)
        drained = [job.id for job in moved]
        write_event(log, node_drained(name, drained, actor=actor))
        write_events(log, (requeued(job, cause) for job in moved))
        self.store.audit(AuditEntry(self.clock(), actor, "drain", name, {"requeued": drained}))
        return drained


def redo_on_conflict(change: Callable[[], T]) -> T:
    """Run a read-modify-write; when another writer changed the same job in between (a
    controller step committing, a user's change), read again and redo it — up to
    ``MAX_ATTEMPTS`` times, then the last ``ConcurrentUpdate`` is raised."""
    for _ in range(MAX_ATTEMPTS - 1):
        try:
            return change()
        except ConcurrentUpdate:
            continue
    return change()
