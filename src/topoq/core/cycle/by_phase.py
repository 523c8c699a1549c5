"""A snapshot's jobs sorted out by phase (``JobsByPhase``), and a shell's running index of
them (``PhaseIndex``) so that a cycle over a long queue need not sort out every job."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from types import MappingProxyType

from topoq.domain.job import HOLDING_PHASES, JobId, JobPhase, JobView

READY_CHANGES_KEPT = 32
"""How many of its last changes of the ready jobs an index hands each cycle (``ReadyChanges``):
a cycle lined up at most that many sorted-out reads ago is brought up to date by them."""


class ReadyChanges:
    """How a :class:`PhaseIndex`'s ready jobs came to be what a :class:`JobsByPhase` holds:
    the index (a token), the generation of these ready jobs (one more at each read that changed
    them) and, for its last ``READY_CHANGES_KEPT`` changes, the generation before each, the
    views that came and the views that went. Whoever lined up the ready jobs of an earlier
    generation of the same index (``ordering.line_up``) takes what came and went since instead
    of comparing every job. Never changed once made."""

    __slots__ = ("generation", "index", "steps")

    def __init__(
        self,
        index: object,
        generation: int,
        steps: tuple[tuple[int, tuple[JobView, ...], tuple[JobView, ...]], ...],
    ) -> None:
        self.index, self.generation, self.steps = index, generation, steps

    @property
    def made_from(self) -> tuple[object, int]:
        """What these ready jobs are: the index and the generation."""
        return self.index, self.generation

    def since(
        self, made_from: tuple[object, int] | None
    ) -> tuple[Sequence[JobView], Sequence[JobView]] | None:
        """The views that came (in the order the index stored them) and went since the ready
        jobs ``made_from`` names (``made_from`` of an earlier one); None when that is not an
        earlier generation of this index still kept."""
        if made_from is None or made_from[0] is not self.index:
            return None
        generation = made_from[1]
        if generation == self.generation:
            return (), ()
        first = next((at for at, step in enumerate(self.steps) if step[0] == generation), None)
        if first is None:
            return None
        came: dict[int, JobView] = {}
        went: dict[int, JobView] = {}
        for _, step_came, step_went in self.steps[first:]:  # every view here is alive: ids hold
            for view in step_went:
                if came.pop(id(view), None) is None:
                    went[id(view)] = view
            for view in step_came:
                if went.get(id(view)) is view:
                    del went[id(view)]
                else:
                    came[id(view)] = view
        return tuple(came.values()), tuple(went.values())


class TellingRead(dict[JobId, JobView]):
    """A store's read of its unfinished jobs that also tells what changed since its read
    before (``since``, a mark the store gave that read; ``until``: this one's): the views
    written since (``changed``, unfinished now) and the ids no longer read (``gone``). An
    index that synced the read marked ``since`` takes the changes instead of comparing every
    job (``PhaseIndex.synced``); any other reader uses it as the dict it is."""

    __slots__ = ("changed", "gone", "since", "until")

    def __init__(
        self,
        jobs: Mapping[JobId, JobView],
        since: object,
        until: object,
        changed: Sequence[JobView],
        gone: Sequence[JobId],
    ) -> None:
        super().__init__(jobs)
        self.since, self.until, self.changed, self.gone = since, until, changed, gone


class JobsByPhase:
    """Jobs sorted out: those that hold capacity (by id), and of them those being preempted;
    the pending ones not held by a user (``ready``, until dependencies block some) and those
    held; the pending ones that depend on other jobs. Made in one pass over a snapshot's
    jobs (each part in their order), or handed over by a shell that keeps a
    :class:`PhaseIndex` (in the order it stored them). What a cycle decides does not depend
    on the order of the jobs (``tests/core/test_cycle_properties.py``). Never changed once
    made: it is part of a snapshot (``Snapshot.by_phase``)."""

    __slots__ = ("dependents", "held", "holding", "preempting", "ready", "ready_changes")

    holding: Mapping[JobId, JobView]
    ready: tuple[JobView, ...]
    held: tuple[JobView, ...]
    dependents: tuple[JobView, ...]
    preempting: tuple[JobView, ...]
    ready_changes: ReadyChanges | None
    """How the ready jobs came from an index's earlier reads (None: made from jobs)."""

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
        self.ready_changes = None


class PhaseIndex:
    """A shell's unfinished jobs sorted out as it stores them (``store``, ``forget``): its
    ``sorted_out()`` is :class:`JobsByPhase` of those jobs at the cost of copying its parts,
    not of a pass over every job — the simulator's snapshot hands it to the cycle
    (``Snapshot.by_phase``), so a cycle over a long queue costs what changed. A stored job
    goes where :class:`JobsByPhase` sorts it (one rule)."""

    __slots__ = (
        "_came",
        "_generation",
        "_parts",
        "_read",
        "_ready",
        "_steps",
        "_synced",
        "_token",
        "_went",
    )

    def __init__(self) -> None:
        self._parts: tuple[dict[JobId, JobView], ...] = tuple({} for _ in range(5))
        """Holding, ready, held, dependents, preempting (``JobsByPhase``'s parts), by id."""
        self._token = object()
        """What this index's ready jobs are known by (``ReadyChanges.index``)."""
        self._ready: tuple[JobView, ...] = ()
        """The ready jobs of the last ``sorted_out``, handed out again while none changed."""
        self._generation = 0
        self._came: dict[int, JobView] = {}
        self._went: dict[int, JobView] = {}
        """The ready views stored and let go since the last ``sorted_out`` (by ``id``)."""
        self._steps: deque[tuple[int, tuple[JobView, ...], tuple[JobView, ...]]] = deque(
            maxlen=READY_CHANGES_KEPT
        )
        self._synced: tuple[dict[JobId, JobView], frozenset[int]] | None = ({}, frozenset())
        """The jobs of the last ``synced`` and the ``id``s of those very views (the dict
        keeps them alive, so the ids stay theirs); None when that read told its changes."""
        self._read: object = None
        """The mark of the last read synced, when its store gave one (``TellingRead``)."""

    def synced(self, jobs: Mapping[JobId, JobView]) -> JobsByPhase:
        """``JobsByPhase`` of ``jobs`` — a shell's read of all its unfinished jobs — with the
        index brought up to date from the last read: a view never changes, so only views not
        read last time are stored and only ids no longer read are forgotten, both found by
        set operations in C. A read that changed a few jobs costs those, not a sort of every
        job (the controller's step). A read that tells what changed since the read synced
        last (``TellingRead``) costs only those, not even a pass in C."""
        if isinstance(jobs, TellingRead) and jobs.since is self._read and jobs.since is not None:
            # the store told what changed since the read synced last: those jobs only
            for gone in jobs.gone:
                self.forget(gone)
            for job in jobs.changed:
                self.store(job)
            self._read, self._synced = jobs.until, None
            return self.sorted_out()
        if self._synced is None:  # the last read was told: the index's parts are what it had
            holding, ready, held = self._parts[:3]
            before = {**holding, **ready, **held}
            before_ids = frozenset(map(id, before.values()))
        else:
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
        self._read = jobs.until if isinstance(jobs, TellingRead) else None
        return self.sorted_out()

    def store(self, job: JobView) -> None:
        """``job`` as it is now (a finished job leaves the index)."""
        self.forget(job.id)
        alone = JobsByPhase((job,))
        for part, sorted_in in zip(self._parts, _parts_of(alone), strict=True):
            if sorted_in:
                part[job.id] = job
        if alone.ready:
            if self._went.get(id(job)) is job:
                del self._went[id(job)]
            else:
                self._came[id(job)] = job

    def forget(self, job_id: JobId) -> None:
        holding, ready, held, dependents, preempting = self._parts
        for part in (holding, held, dependents, preempting):
            part.pop(job_id, None)
        went = ready.pop(job_id, None)
        if went is not None and self._came.pop(id(went), None) is None:
            self._went[id(went)] = went

    def sorted_out(self) -> JobsByPhase:
        holding, ready, held, dependents, preempting = self._parts
        if self._came or self._went:
            step = (self._generation, tuple(self._came.values()), tuple(self._went.values()))
            self._steps.append(step)
            self._generation += 1
            self._came, self._went = {}, {}
            self._ready = tuple(ready.values())
        made = JobsByPhase.__new__(JobsByPhase)
        made._set(
            dict(holding), self._ready, held.values(), dependents.values(), preempting.values()
        )
        made.ready_changes = ReadyChanges(self._token, self._generation, tuple(self._steps))
        return made


def _parts_of(
    jobs: JobsByPhase,
) -> tuple[Iterable[JobView], ...]:
    """The parts in ``PhaseIndex``'s order."""
    return (jobs.holding.values(), jobs.ready, jobs.held, jobs.dependents, jobs.preempting)
