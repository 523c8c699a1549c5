"""Job dependencies: after-ok, after-any, after-failed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topoq.domain.decisions import Cancel, Diagnostic, PendingReason
from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase, JobView


@dataclass(frozen=True)
class DependencyState:
    cancellations: tuple[Cancel, ...]
    """Pending jobs that can never run: an after-ok dependency failed, and the like."""
    waiting: tuple[Diagnostic, ...]
    blocked: frozenset[JobId]
    """Pending jobs not to consider this cycle (cancelled or waiting)."""


def resolve_dependencies(jobs: Iterable[JobView]) -> DependencyState:
    by_id = {job.id: job for job in jobs}
    cancellations: list[Cancel] = []
    waiting: list[Diagnostic] = []
    for job in by_id.values():
        if job.phase is not JobPhase.PENDING or not job.spec.dependencies:
            continue
        verdicts = [(dep, _verdict(dep, by_id.get(dep.job))) for dep in job.spec.dependencies]
        broken = [(dep, why) for dep, why in verdicts if why is not None and why != _WAIT]
        if broken:
            dep, why = broken[0]
            cancellations.append(Cancel(job.id, f"dependency {dep.kind.value} {dep.job}: {why}"))
            continue
        open_deps = [dep for dep, why in verdicts if why == _WAIT]
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


_WAIT = "wait"


def _verdict(dependency: Dependency, other: JobView | None) -> str | None:
    """None when satisfied, ``_WAIT`` while open, else why it can never be satisfied."""
    if other is None:
        return "no such job"
    phase = other.phase
    if not phase.finished:
        return _WAIT
    match dependency.kind:
        case DependencyKind.AFTER_OK:
            return None if phase is JobPhase.SUCCEEDED else f"it ended {phase.value}"
        case DependencyKind.AFTER_FAILED:
            return None if phase is JobPhase.FAILED else f"it ended {phase.value}, not failed"
        case DependencyKind.AFTER_ANY:
            return None
