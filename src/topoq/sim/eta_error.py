"""How far the simulator's ETAs were from the actual starts: for every job that was given an
expected start while it waited (a ``wait`` entry's ``eta``) and started later, the error of
the *first* ETA it was given (actual start − ETA: positive when it started late)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topoq.domain.job import JobId
from topoq.sim.log import Decision, LogEntry
from topoq.sim.summary import percentile


@dataclass(frozen=True)
class EtaError:
    jobs: int
    """Jobs that were given an ETA and started."""
    mean_abs_s: float | None = None
    p90_abs_s: float | None = None
    mean_s: float | None = None
    """The mean signed error: above 0 when jobs started later than said."""


def eta_error(entries: Iterable[LogEntry]) -> EtaError:
    first_eta: dict[JobId, float] = {}
    errors: list[float] = []
    for entry in entries:
        if entry.job is None:
            continue
        if entry.decision is Decision.WAIT and entry.eta is not None:
            first_eta.setdefault(entry.job, entry.eta)
        elif entry.decision is Decision.START and entry.job in first_eta:
            errors.append(entry.t - first_eta.pop(entry.job))
    if not errors:
        return EtaError(0)
    absolute = [abs(error) for error in errors]
    return EtaError(
        len(errors),
        sum(absolute) / len(absolute),
        percentile(absolute, 90),
        sum(errors) / len(errors),
    )
