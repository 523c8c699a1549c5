"""Jobs that arrive after a cycle and change nothing: ``arrivals_waiting``.

The rule (ADR 0007, "Arrivals that change nothing"): a snapshot that is the last cycle's with
jobs added — the very same jobs otherwise, in the same order, on the same rules, upstream
phases and fair-share usage, and no time-based rule changing an answer since — in which each
added job is a ready job that comes at the end of its team's queue and is of a class whose
failure stood when the last cycle ended, gets what that cycle decided, and each added job
waits as its class failed. A cycle on it would decide exactly that: every job before an
added one in the order has its turn on the same state as last time; the added job's turn
comes after the turn that last remembered its class's failure (the same team's queue,
further on) and after every turn that could forget it (none did, or the failure would not
have stood at the end), so it waits alike, which changes nothing for the turns after it.
So a queue that only grows (a sweep of submissions to a full cluster) costs a cycle per
change of capacity, not per job submitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import is_

from topoq.core.admission import workload_shape
from topoq.core.cycle.by_phase import JobsByPhase
from topoq.core.cycle.snapshot import Snapshot
from topoq.core.cycle.state import Carried, ParkedWait, SettledWaits, class_of_job
from topoq.core.holds import alike
from topoq.core.ordering import Queued, key_on_books, order_facts
from topoq.core.time_limits import time_limit_of
from topoq.domain.decisions import Diagnostic
from topoq.domain.governance import QueueingStrategy, TeamName
from topoq.domain.job import JobId, JobPhase, JobView


@dataclass(frozen=True)
class ArrivalWaits:
    """How the jobs added since the last cycle wait (their diagnostics, in the order they were
    added) and what the cycle hands on with them counted in."""

    diagnostics: tuple[Diagnostic, ...]
    carried: Carried


def arrivals_waiting(before: Snapshot, carried: Carried, snapshot: Snapshot) -> ArrivalWaits | None:
    """How the jobs ``snapshot`` adds to ``before`` (the last cycle's snapshot, which handed
    on ``carried``) wait, when the rule above holds (None: a cycle must run)."""
    failures, lineup = carried.failures, carried.lineup
    kept = before.jobs
    jobs = snapshot.jobs
    if (
        failures is None
        or lineup is None
        or len(jobs) <= len(kept)
        or snapshot.upstream_phases != before.upstream_phases
        or snapshot.fair_share_usage != before.fair_share_usage
        or (snapshot.packs_by_fragmentation and snapshot.tree.shares_gpus.any())
        or not all(map(is_, jobs, kept))  # the very same jobs first (stops at the shorter)
    ):
        return None  # (a cluster packed by fragmentation counts every job in its task mix)
    added = jobs[len(kept) :]
    policy = snapshot.policy
    strict = {t.name for t in policy.teams if t.queueing is QueueingStrategy.STRICT_FIFO}
    named = _upstream_named(snapshot)
    guard = policy.starvation_guard_s
    arrived: list[tuple[Queued, Diagnostic, ParkedWait | None]] = []
    for job in added:
        if (
            job.phase is not JobPhase.PENDING
            or job.held
            or job.spec.dependencies
            or job.team in strict
            or job.id in named
            or job.id in carried.waits  # a job the last cycle knew, seen anew
            or (guard > 0 and job.entered_queue_at + guard <= snapshot.now)
        ):
            return None
        shape = workload_shape(job.spec.workload)
        limit = time_limit_of(policy, job)
        number = carried.class_numbers.get(class_of_job(policy, job, shape, limit))
        if number is None:
            return None  # a class not met: its first try is due
        failure = failures.get(number)
        queue = lineup.queues.get(job.team)
        if failure is None or not queue:
            return None  # a class that did not fail: its first try is due
        entry = (order_facts(policy, job, number, shape.demand), job)
        if not queue[-1] < entry:
            return None  # it would come before a job of its team that had its turn
        diagnostic, identity = failure
        said = alike(diagnostic, job)
        arrived.append((entry, said, None if identity is None else (identity, said)))
    if not _time_stands(before, carried, snapshot, added):
        return None  # (asked last: it looks at every holder)
    arrived.sort(key=lambda one: one[0][0])  # in their order (a team's, as its turns come)
    waits: dict[JobId, ParkedWait] = {}
    queued: dict[TeamName, list[tuple[Queued, ParkedWait | None]]] = {}
    for entry, _, parked in arrived:
        if parked is not None:
            waits[entry[1].id] = parked
        queued.setdefault(entry[1].team, []).append((entry, parked))
    settled = dict(carried.settled)
    for team, at_end in queued.items():
        grown = _settled_with(carried, team, at_end)
        if grown is not None:
            settled[team] = grown
    return ArrivalWaits(
        tuple(said for _, said, _ in arrived),
        replace(
            carried,
            waits={**carried.waits, **waits},
            settled=settled,
            arrived=carried.arrived + tuple(entry for entry, _, _ in arrived),
        ),
    )


def _time_stands(
    before: Snapshot, carried: Carried, snapshot: Snapshot, added: Sequence[JobView]
) -> bool:
    """Whether no rule that time enters can have changed an answer from ``before.now`` to
    ``snapshot.now``: the same instant, or a later one while no job has a time limit
    (expected starts and backfill move with time; the classes met know their limits) and
    every job lined up that passed the starvation guard since comes after the starving job
    the cycle held for, in the guard's order (``Carried.guard_passes_after``): the guard holds
    for that one again, and a starving job is read nowhere else. Held and blocked jobs are
    not lined up: their guard passing changes nothing."""
    now, then = snapshot.now, before.now
    if now == then:
        return True
    if now < then:
        return False
    policy = snapshot.policy
    if any(limit is not None for _, _, _, limit in carried.class_numbers):
        return False  # a class met (maybe of a job gone: never too hopeful) has a time limit
    phases = snapshot.by_phase or JobsByPhase(snapshot.jobs)
    others = (*phases.holding.values(), *phases.held, *phases.dependents, *added)
    if any(time_limit_of(policy, job) is not None for job in others):
        return False
    guard = policy.starvation_guard_s
    if guard <= 0:
        return True
    lineup = carried.lineup
    passing = lineup.passing_guard_by(now) if lineup is not None else []
    passing += [entry for entry in carried.arrived if entry[0].waiting_since + guard <= now]
    if not passing:
        return True
    bound, books = carried.guard_passes_after, carried.books
    if bound is None or books is None:
        return False
    usage = snapshot.fair_share_usage
    return all(key_on_books(books, job, facts, usage) > bound for facts, job in passing)


def _upstream_named(snapshot: Snapshot) -> set[JobId]:
    """The jobs a pending job of ``snapshot`` depends on."""
    phases = snapshot.by_phase
    dependents = (
        phases.dependents
        if phases is not None
        else [job for job in snapshot.jobs if job.spec.dependencies]
    )
    return {dependency.job for job in dependents for dependency in job.spec.dependencies}


def _settled_with(
    carried: Carried, team: TeamName, arrived: list[tuple[Queued, ParkedWait | None]]
) -> SettledWaits | None:
    """The team's settled waits (``SettledWaits``) with the jobs that ``arrived`` at the end
    of its queue (in its order), when the team left the last cycle's order settled and each
    of them waits with an identity: the next cycle that settles the team again takes them
    whole too."""
    known = carried.settled.get(team)
    if known is None or any(parked is None for _, parked in arrived):
        return None
    entries = [entry for entry, _ in arrived]
    parked = [wait for _, wait in arrived if wait is not None]
    failures = dict(known.failures)
    for (facts, _), (identity, _) in zip(entries, parked, strict=True):
        failures[facts.alike] = identity
    return SettledWaits(
        known.entries + entries,
        known.ids + [entry[1].id for entry in entries],
        known.parked + parked,
        known.said + [said for _, said in parked],
        failures,
    )
