"""Job dependencies: after-ok, after-any, after-failed.

A pending job's dependency is *open* while the job it names (its upstream) has not finished,
*met* once the upstream ended in a way the kind accepts, and *broken* when it ended otherwise
(or no job has that id): a job with a broken dependency can never run and is cancelled.

An upstream job is looked up first among the snapshot's jobs, then in ``upstream_phases``: the
phase of each upstream job that is not among them. The controller reads only unfinished jobs
from the store and fills ``upstream_phases`` for the finished ones (``absent_upstream`` says
which to read); the simulator keeps every job, finished or not, in the snapshot.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from topoq.domain.decisions import Cancel, Diagnostic, PendingReason
from topoq.domain.job import (
    Dependency,
    DependencyKind,
    DependencyStatus,
    JobId,
    JobPhase,
    JobView,
)


@dataclass(frozen=True)
class DependencyState:
    cancellations: tuple[Cancel, ...]
    """Pending jobs that can never run: an after-ok dependency failed, and the like."""
    waiting: tuple[Diagnostic, ...]
    blocked: frozenset[JobId]
    """Pending jobs not to consider this cycle (cancelled or waiting)."""


def absent_upstream(
    jobs: Collection[JobView], dependents: Collection[JobView] | None = None
) -> frozenset[JobId]:
    """The ids that pending jobs among ``jobs`` depend on and that are not among ``jobs``:
    what a shell holding only unfinished jobs looks up for ``upstream_phases``.
    ``dependents``: those pending jobs of ``jobs`` that depend on others, when the caller
    sorted them out already (``JobsByPhase.dependents``)."""
    pending = (
        [job for job in jobs if job.phase is JobPhase.PENDING and job.spec.dependencies]
        if dependents is None
        else dependents
    )
    if not pending:
        return frozenset()
    present = {job.id for job in jobs}
    return frozenset(
        dep.job for job in pending for dep in job.spec.dependencies if dep.job not in present
    )


def resolve_dependencies(
    jobs: Iterable[JobView],
    upstream_phases: Mapping[JobId, JobPhase] | None = None,
    *,
    dependents: Sequence[JobView] | None = None,
) -> DependencyState:
    """Which pending jobs that depend on others are cancelled (a dependency broken) or wait
    (one still open). ``dependents``: those pending jobs of ``jobs`` that have dependencies,
    in order, when the caller sorted them out already."""
    jobs = tuple(jobs)
    if dependents is None:
        dependents = [
            job for job in jobs if job.spec.dependencies and job.phase is JobPhase.PENDING
        ]
    if not dependents:  # most cycles: nothing waits on another job
        return DependencyState((), (), frozenset())
    by_id = {job.id: job for job in jobs}
    elsewhere = upstream_phases or {}
    cancellations: list[Cancel] = []
    waiting: list[Diagnostic] = []
    for job in dependents:
        standing = [(dep, _phase_of(dep.job, by_id, elsewhere)) for dep in job.spec.dependencies]
        broken = [
            (dep, phase)
            for dep, phase in standing
            if dependency_status(dep, phase) is DependencyStatus.BROKEN
        ]
        if broken:
            dep, phase = broken[0]
            cancellations.append(
                Cancel(job.id, f"dependency {dep.kind.value} {dep.job}: {_why_broken(dep, phase)}")
            )
            continue
        open_deps = [
            dep for dep, phase in standing if dependency_status(dep, phase) is DependencyStatus.OPEN
        ]
        if open_deps:
            names = ", ".join(f"{dep.kind.value} {dep.job}" for dep in open_deps)
            waiting.append(
                Diagnostic(
                    job.id,
                    PendingReason.WAITING_ON_DEPENDENCY,
                    f"waiting on {names}",
                    {"open": len(open_deps)},
                )
            )
    blocked = frozenset(c.job for c in cancellations) | frozenset(d.job for d in waiting)
    return DependencyState(tuple(cancellations), tuple(waiting), blocked)


def dependency_status(dependency: Dependency, upstream: JobPhase | None) -> DependencyStatus:
    """Whether the dependency is open, met or broken, given its upstream job's phase (None: no
    job has that id)."""
    if upstream is None:
        return DependencyStatus.BROKEN
    if not upstream.finished:
        return DependencyStatus.OPEN
    accepted = {
        DependencyKind.AFTER_OK: upstream is JobPhase.SUCCEEDED,
        DependencyKind.AFTER_FAILED: upstream is JobPhase.FAILED,
        DependencyKind.AFTER_ANY: True,
    }[dependency.kind]
    return DependencyStatus.MET if accepted else DependencyStatus.BROKEN


def dependency_cycle(dependencies: Mapping[JobId, Iterable[JobId]]) -> tuple[JobId, ...] | None:
    """A cycle among the jobs given (each job's upstream ids), as the ids along it with the
    first repeated at the end (``(a, b, a)``; ``(a, a)`` for a job that names itself); None
    when there is none. Ids that are not keys end a path."""
    graph = {job: tuple(upstream) for job, upstream in dependencies.items()}
    done: set[JobId] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, edges = [start], [iter(graph[start])]
        while edges:
            upstream = next(edges[-1], None)
            if upstream is None:
                edges.pop()
                done.add(path.pop())
            elif upstream in path:
                return (*path[path.index(upstream) :], upstream)
            elif upstream in graph and upstream not in done:
                path.append(upstream)
                edges.append(iter(graph[upstream]))
    return None


def _phase_of(
    job: JobId, by_id: Mapping[JobId, JobView], elsewhere: Mapping[JobId, JobPhase]
) -> JobPhase | None:
    found = by_id.get(job)
    return found.phase if found is not None else elsewhere.get(job)


def _why_broken(dependency: Dependency, upstream: JobPhase | None) -> str:
    if upstream is None:
        return "no such job"
    if dependency.kind is DependencyKind.AFTER_FAILED:
        return f"it ended {upstream.value}, not failed"
    return f"it ended {upstream.value}"
