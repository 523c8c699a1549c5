"""A cycle that carries what it parked to the next: ``schedule_with_parking``.

The rule (ADR 0007): the cycle is a pure function of its snapshot, so a snapshot that is the
same as the last one — the same tree, policy, jobs (the very same objects), upstream phases
and fair-share usage, at the same instant or at a later one before any time-based rule
changes an answer — gets the last result again without a cycle; so does one that only adds
jobs that change nothing, each waiting as its class failed (``cycle.arrivals``). Otherwise
the cycle runs,
and a job that waits the same way as after the last cycle (on the same policy and tree: the
same reason about the same flavor) keeps the diagnostic it had: its message, numbers and
remedies, most of the cost of a diagnosis, are worked out again only when its reason
changes (``topoq explain`` works them out afresh). Admissions, preemptions, requeues,
cancellations and every job's reason are exactly those of ``schedule(snapshot)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from topoq.core.cycle.arrivals import arrivals_waiting
from topoq.core.cycle.run import run_cycle
from topoq.core.cycle.snapshot import Snapshot
from topoq.core.cycle.state import Carried
from topoq.core.starvation import next_time_rule_change
from topoq.core.time_limits import time_limit_of
from topoq.domain.decisions import CycleResult


@dataclass(frozen=True)
class Parking:
    """What one cycle leaves for the next (an immutable value the shell keeps between
    cycles and hands back): its snapshot, its result and each waiting job's diagnostic."""

    snapshot: Snapshot
    result: CycleResult
    carried: Carried = field(repr=False)
    """How each job diagnosed in the cycle waits, and each job's class."""
    cycled: bool = True
    """Whether a cycle ran for ``snapshot`` (False: the jobs it added waited as their classes
    had failed, on the last cycle's result: ``cycle.arrivals``)."""

    @cached_property
    def answers_change_at(self) -> float | None:
        """When time alone may change what a cycle on this snapshot decides: never (None)
        while no job has a time limit (expected starts and backfill need one), else at the
        next time-based rule change (a time limit reached, a job starving)."""
        snapshot = self.snapshot
        if any(time_limit_of(snapshot.policy, job) is not None for job in snapshot.jobs):
            return snapshot.now  # expected starts and backfill move with time
        return next_time_rule_change(snapshot.jobs, snapshot.now, snapshot.policy)

    def guard_passes_next(self, after: float) -> float | None:
        """The first instant after ``after`` at which a ready job (pending, not held, not
        blocked: the jobs lined up) passes the starvation guard: when a cycle on these jobs
        may next decide otherwise because of the guard (a held or blocked job's turn does not
        come, so its guard passing changes nothing). None: none will, or the guard is off.
        ``after`` is the instant of the snapshot the parking was handed back for, which may
        be later than its own: jobs whose guard passed in between went (a snapshot with one
        that stayed gets no parking back), so only what comes after it counts. Told by the
        lineup the cycle kept and the jobs that arrived since without a cycle, not by a pass
        over every job; a job that went may still be counted (never later than the truth).
        Raises ``LookupError`` when no lineup was kept."""
        snapshot, carried = self.snapshot, self.carried
        guard = snapshot.policy.starvation_guard_s
        if guard <= 0:
            return None
        lineup = carried.lineup
        if lineup is None:
            raise LookupError("no lineup was kept")
        times = [lineup.next_guard_passing(after)]
        times += [facts.waiting_since + guard for facts, _ in carried.arrived]
        return min((at for at in times if at is not None and at > after), default=None)

    def same_rules(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot`` has the parked cycle's tree, flavor label and policy: only then
        is what it carried worth anything."""
        before = self.snapshot
        return (
            snapshot.tree is before.tree
            and snapshot.flavor_label == before.flavor_label
            and snapshot.policy == before.policy
            and snapshot.placement is before.placement
        )

    def holds_for(self, snapshot: Snapshot) -> bool:
        """Whether a cycle on ``snapshot`` (with the same rules) decides what the parked cycle
        decided."""
        before = self.snapshot
        if not (
            len(snapshot.jobs) == len(before.jobs)
            and all(a is b for a, b in zip(snapshot.jobs, before.jobs, strict=True))
            and snapshot.upstream_phases == before.upstream_phases
            and snapshot.fair_share_usage == before.fair_share_usage
        ):
            return False
        if snapshot.now == before.now:
            return True
        changes_at = self.answers_change_at
        return snapshot.now > before.now and (changes_at is None or snapshot.now < changes_at)


def schedule_with_parking(
    snapshot: Snapshot, parking: Parking | None = None, *, arrivals: bool = True
) -> tuple[CycleResult, Parking]:
    """One cycle, reusing what the cycle that left ``parking`` worked out where it cannot
    have changed; the same decisions and reasons as ``schedule(snapshot)``. ``arrivals``:
    jobs added since that change nothing wait as their classes did, without a cycle
    (``cycle.arrivals``)."""
    if parking is None or not parking.same_rules(snapshot):
        parking = None  # a policy or inventory change: nothing carried holds
    elif parking.holds_for(snapshot):
        return parking.result, parking
    elif arrivals:
        waiting = arrivals_waiting(parking.snapshot, parking.carried, snapshot)
        if waiting is not None:
            before = parking.result
            result = replace(before, diagnostics=before.diagnostics + waiting.diagnostics)
            return result, Parking(snapshot, result, waiting.carried, cycled=False)
    result, carried = run_cycle(snapshot, parking.carried if parking is not None else None)
    return result, Parking(snapshot, result, carried)
