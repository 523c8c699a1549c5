"""A snapshot's jobs sorted out by phase (``JobsByPhase``), and a shell's running index of
them (``PhaseIndex``) so that a cycle over a long queue need not sort out every job."""

from __future__ import annotations

from collections.abc import Iterable

from topoq.domain.job import HOLDING_PHASES, JobId, JobPhase, JobView


class JobsByPhase:
    """Jobs sorted out: those that hold capacity (by id), and of them those being preempted;
    the pending ones not held by a user (``ready``, until dependencies block some) and those
    held; the pending ones that depend on other jobs. Made in one pass over a snapshot's
    jobs (each list in their order), or handed over by a shell that keeps a
    :class:`PhaseIndex` (in the order it stored them). What a cycle decides does not depend
    on the order of the jobs (``tests/core/test_cycle_properties.py``)."""

    __slots__ = ("dependents", "held", "holding", "preempting", "ready")

    def __init__(self, jobs: Iterable[JobView] = ()) -> None:
        self.holding: dict[JobId, JobView] = {}
        self.ready: list[JobView] = []
        self.held: list[JobView] = []
        self.dependents: list[JobView] = []
        self.preempting: list[JobView] = []
        for job in jobs:
            phase = job.phase
            if phase is JobPhase.PENDING:
                (self.held if job.held else self.ready).append(job)
                if job.spec.dependencies:
                    self.dependents.append(job)
            elif phase in HOLDING_PHASES:
                self.holding[job.id] = job
                if phase is JobPhase.PREEMPTING:
                    self.preempting.append(job)


class PhaseIndex:
    """A shell's unfinished jobs sorted out as it stores them (``store``, ``forget``): its
    ``sorted_out()`` is :class:`JobsByPhase` of those jobs at the cost of copying its lists,
    not of a pass over every job — the simulator's snapshot hands it to the cycle
    (``Snapshot.by_phase``), so a cycle over a long queue costs what changed."""

    __slots__ = ("_dependents", "_held", "_holding", "_preempting", "_ready")

    def __init__(self) -> None:
        self._holding: dict[JobId, JobView] = {}
        self._ready: dict[JobId, JobView] = {}
        self._held: dict[JobId, JobView] = {}
        self._dependents: dict[JobId, JobView] = {}
        self._preempting: dict[JobId, JobView] = {}

    def store(self, job: JobView) -> None:
        """``job`` as it is now (a finished job leaves the index)."""
        job_id = job.id
        self.forget(job_id)
        phase = job.phase
        if phase is JobPhase.PENDING:
            (self._held if job.held else self._ready)[job_id] = job
            if job.spec.dependencies:
                self._dependents[job_id] = job
        elif phase in HOLDING_PHASES:
            self._holding[job_id] = job
            if phase is JobPhase.PREEMPTING:
                self._preempting[job_id] = job

    def forget(self, job_id: JobId) -> None:
        for sorted_out in (
            self._holding,
            self._ready,
            self._held,
            self._dependents,
            self._preempting,
        ):
            sorted_out.pop(job_id, None)

    def sorted_out(self) -> JobsByPhase:
        made = JobsByPhase()
        made.holding = dict(self._holding)
        made.ready = list(self._ready.values())
        made.held = list(self._held.values())
        made.dependents = list(self._dependents.values())
        made.preempting = list(self._preempting.values())
        return made
