"""A snapshot's jobs sorted out by phase (``JobsByPhase``), and a shell's running index of
them (``PhaseIndex``) so that a cycle over a long queue need not sort out every job."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress
from types import MappingProxyType

from topoq.domain.job import HOLDING_PHASES, JobId, JobPhase, JobView


class JobsByPhase:
    """Jobs sorted out: those that hold capacity (by id), and of them those being preempted;
    the pending ones not held by a user (``ready``, until dependencies block some) and those
    held; the pending ones that depend on other jobs. Made in one pass over a snapshot's
    jobs (each part in their order), or handed over by a shell that keeps a
    :class:`PhaseIndex` (in the order it stored them). What a cycle decides does not depend
    on the order of the jobs (``tests/core/test_cycle_properties.py``). Never changed once
    made: it is part of a snapshot (``Snapshot.by_phase``)."""

    __slots__ = ("dependents", "held", "holding", "preempting", "ready")

    holding: Mapping[JobId, JobView]
    ready: tuple[JobView, ...]
    held: tuple[JobView, ...]
    dependents: tuple[JobView, ...]
    preempting: tuple[JobView, ...]

    def __init__(self, jobs: Iterable[JobView] = ()) -> None:
        holding: dict[JobId, JobView] = {}
        ready: list[JobView] = []
        held: list[JobView] = []
        dependents: list[JobView] = []
        preempting: list[JobView] = []
        for job in jobs:
            phase = job.phase
            if phase is JobPhase.PENDING:
                (held if job.held else ready).append(job)
                if job.spec.dependencies:
                    dependents.append(job)
            elif phase in HOLDING_PHASES:
                holding[job.id] = job
                if phase is JobPhase.PREEMPTING:
                    preempting.append(job)
        self._set(holding, ready, held, dependents, preempting)

    def _set(
        self,
        holding: dict[JobId, JobView],
        ready: Iterable[JobView],
        held: Iterable[JobView],
        dependents: Iterable[JobView],
        preempting: Iterable[JobView],
    ) -> None:
        self.holding = MappingProxyType(holding)
        self.ready, self.held = tuple(ready), tuple(held)
        self.dependents, self.preempting = tuple(dependents), tuple(preempting)


class PhaseIndex:
    """A shell's unfinished jobs sorted out as it stores them (``store``, ``forget``): its
    ``sorted_out()`` is :class:`JobsByPhase` of those jobs at the cost of copying its parts,
    not of a pass over every job — the simulator's snapshot hands it to the cycle
    (``Snapshot.by_phase``), so a cycle over a long queue costs what changed. A stored job
    goes where :class:`JobsByPhase` sorts it (one rule)."""

    __slots__ = ("_parts", "_synced")

    def __init__(self) -> None:
        self._parts: tuple[dict[JobId, JobView], ...] = tuple({} for _ in range(5))
        """Holding, ready, held, dependents, preempting (``JobsByPhase``'s parts), by id."""
        self._synced: tuple[dict[JobId, JobView], frozenset[int]] = ({}, frozenset())
        """The jobs of the last ``synced`` and the ``id``s of those very views (the dict
        keeps them alive, so the ids stay theirs)."""

    def synced(self, jobs: Mapping[JobId, JobView]) -> JobsByPhase:
        """``JobsByPhase`` of ``jobs`` — a shell's read of all its unfinished jobs — with the
        index brought up to date from the last read: a view never changes, so only views not
        read last time are stored and only ids no longer read are forgotten, both found by
        set operations in C. A read that changed a few jobs costs those, not a sort of every
        job (the controller's step)."""
        before, before_ids = self._synced
        views = jobs.values()
        ids = frozenset(map(id, views))
        for gone in before.keys() - jobs.keys():
            self.forget(gone)
        came = ids - before_ids
        if came:
            for job in compress(views, map(came.__contains__, map(id, views))):
                self.store(job)
        self._synced = (dict(jobs), ids)
        return self.sorted_out()

    def store(self, job: JobView) -> None:
        """``job`` as it is now (a finished job leaves the index)."""
        self.forget(job.id)
        alone = JobsByPhase((job,))
        for part, sorted_in in zip(self._parts, _parts_of(alone), strict=True):
            if sorted_in:
                part[job.id] = job

    def forget(self, job_id: JobId) -> None:
        for part in self._parts:
            part.pop(job_id, None)

    def sorted_out(self) -> JobsByPhase:
        holding, ready, held, dependents, preempting = self._parts
        made = JobsByPhase.__new__(JobsByPhase)
        made._set(
            dict(holding), ready.values(), held.values(), dependents.values(), preempting.values()
        )
        return made


def _parts_of(
    jobs: JobsByPhase,
) -> tuple[Iterable[JobView], ...]:
    """The parts in ``PhaseIndex``'s order."""
    return (jobs.holding.values(), jobs.ready, jobs.held, jobs.dependents, jobs.preempting)
