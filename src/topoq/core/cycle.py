"""One scheduling cycle: ``schedule(snapshot) -> CycleResult``, a pure function.

1. Requeue gangs that lost a node.
2. Resolve dependencies: cancel what can never run, hold back what must wait.
3. Order pending work: within-guarantee first, then priority, fair-share position, submit time
   (re-evaluated after every admission, team heads first).
4. For each job: quota, then topology-aware placement on the capacity left; else
   topology-aware preemption (in-team priority, reclaim, fair share); else a reservation for a
   blocked gang and a diagnostic that says why it waits.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field, replace

from topoq.core.admission import (
    Attempt,
    QuotaHold,
    could_ever_run,
    flavors_for,
    in_flavor,
    try_flavor,
    workload_shape,
)
from topoq.core.dependencies import resolve_dependencies
from topoq.core.diagnostics import diagnose_waiting
from topoq.core.holdings import (
    capacity_by_flavor,
    flavor_values,
    ledger_after,
    total_demand,
    usage_by_team,
)
from topoq.core.ledger import CapacityLedger, confined_out
from topoq.core.ordering import eviction_order, pending_in_order, priority_of, team_order_key
from topoq.core.preemption import MayEvict, VictimSearch, select_victims
from topoq.core.quota import QuotaBook, QuotaVerdict, dominant_share
from topoq.core.reservation import domain_to_reserve
from topoq.core.tree import ExclusionReason, TopologyTree
from topoq.domain.decisions import (
    Admit,
    CycleResult,
    Diagnostic,
    PendingReason,
    Preempt,
    PreemptionCause,
    Requeue,
    RequeueCause,
)
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    IdleAllocation,
    PreemptTeamTasks,
    QueueingStrategy,
    TeamName,
)
from topoq.domain.job import Allocation, JobId, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeName


@dataclass(frozen=True)
class Snapshot:
    """Everything a cycle may look at. ``tree`` holds the schedulable nodes (rebuilt when the
    inventory or node health changes); time enters only as ``now``."""

    now: float
    tree: TopologyTree
    jobs: tuple[JobView, ...]
    policy: ClusterPolicy
    flavor_label: str = INSTANCE_TYPE_LABEL


@dataclass
class _Cycle:
    """The cycle's scratch state; never escapes ``schedule``."""

    snapshot: Snapshot
    ledger: CapacityLedger
    book: QuotaBook
    holders: dict[JobId, JobView]
    admissions: list[Admit] = field(default_factory=list)
    preemptions: list[Preempt] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    evicting: set[JobId] = field(default_factory=set)
    reserved: list[tuple[int, int, str]] = field(default_factory=list)
    """Node ranges held for blocked gangs: (start, end, domain name)."""
    reserving_teams: set[TeamName] = field(default_factory=set)
    gaining_teams: set[TeamName] = field(default_factory=set)
    losing_teams: set[TeamName] = field(default_factory=set)
    """Teams that won or lost work to another team's preemption this cycle: neither is turned
    around in the same cycle, so work is not evicted only to be readmitted at once."""
    blocked_teams: set[TeamName] = field(default_factory=set)
    team_holds: dict[TeamName, QuotaHold] = field(default_factory=dict)
    """Quota held for each team's first waiting job (its queue head) against the team's own
    later jobs, so that smaller jobs cannot keep it waiting forever."""
    failed_shapes: dict[Hashable, Diagnostic] = field(default_factory=dict)
    """Jobs that could not be admitted nor make room, by (team, priority, shape): within a
    cycle capacity and quota only get used up, so an identical job fails the same way."""

    @property
    def policy(self) -> ClusterPolicy:
        return self.snapshot.policy

    def ledger_for_others(self) -> CapacityLedger:
        """The capacity left, minus the domains reserved for blocked gangs."""
        return confined_out(self.ledger, [(s, e) for s, e, _ in self.reserved])


def schedule(snapshot: Snapshot) -> CycleResult:
    requeues = _requeue_lost_gangs(snapshot)
    requeued = {requeue.job for requeue in requeues}
    dependencies = resolve_dependencies(snapshot.jobs)
    holders = {
        job.id: job for job in snapshot.jobs if job.phase.holds_capacity and job.id not in requeued
    }
    cycle = _Cycle(
        snapshot,
        ledger_after(snapshot.tree, holders.values()),
        QuotaBook(
            snapshot.policy,
            capacity_by_flavor(snapshot.tree, snapshot.flavor_label),
            usage_by_team(holders.values()),
        ),
        holders,
    )
    cycle.diagnostics.extend(dependencies.waiting)
    ready = []
    for job in snapshot.jobs:
        if job.phase is not JobPhase.PENDING or job.id in dependencies.blocked:
            continue
        if job.held:
            cycle.diagnostics.append(Diagnostic(job.id, PendingReason.HELD, "held by a user"))
            continue
        ready.append(job)
    for job in pending_in_order(ready, cycle.book):
        _consider(cycle, job)
    return CycleResult(
        admissions=tuple(cycle.admissions),
        preemptions=tuple(cycle.preemptions),
        requeues=tuple(requeues),
        cancellations=dependencies.cancellations,
        diagnostics=tuple(cycle.diagnostics),
    )


def _requeue_lost_gangs(snapshot: Snapshot) -> list[Requeue]:
    tree = snapshot.tree
    failed = {e.name for e in tree.excluded if e.reason is ExclusionReason.NOT_READY}
    known = set(tree.node_index) | {e.name for e in tree.excluded}
    requeues = []
    for job in snapshot.jobs:
        if not job.phase.holds_capacity or job.allocation is None:
            continue
        lost = sorted(n for n in job.allocation.nodes if n in failed or n not in known)
        if lost:
            requeues.append(
                Requeue(
                    job.id,
                    RequeueCause.NODE_FAILED,
                    f"node {lost[0]} of the gang failed; the gang is requeued",
                )
            )
    return requeues


def _consider(cycle: _Cycle, job: JobView) -> None:
    if job.team in cycle.blocked_teams or _behind_strict_head(cycle, job):
        cycle.diagnostics.append(
            Diagnostic(
                job.id,
                PendingReason.BLOCKED_BY_QUEUE_HEAD,
                f"team {job.team} queues strict-fifo and an earlier job of the team is waiting",
            )
        )
        return
    shape = (job.team, priority_of(cycle.policy, job), _shape(job))
    known = cycle.failed_shapes.get(shape)
    if known is not None:
        cycle.diagnostics.append(replace(known, job=job.id))
    else:
        hold = cycle.team_holds.get(job.team)
        if hold is not None and hold.job == job.id:
            hold = None
        attempts = _attempts(cycle, job, hold.applied_to(cycle.book) if hold else cycle.book)
        admitted = next((a for a in attempts if a.allocation is not None), None)
        if admitted is not None and admitted.allocation is not None:
            _admit(cycle, job, admitted.allocation)
            return
        if hold is not None:
            cycle.failed_shapes[shape] = _held_back(cycle, job, hold)
        elif not _preempt_for(cycle, job, attempts):
            cycle.failed_shapes[shape] = _wait(cycle, job, attempts)
    if _strict(cycle, job.team):
        cycle.blocked_teams.add(job.team)


def _strict(cycle: _Cycle, team: TeamName) -> bool:
    spec = cycle.policy.by_team.get(team)
    return spec is not None and spec.queueing is QueueingStrategy.STRICT_FIFO


def _behind_strict_head(cycle: _Cycle, job: JobView) -> bool:
    """In a strict-fifo team, a job waits while any job ahead of it in the team's own order
    (priority, then submission) is still pending."""
    if not _strict(cycle, job.team):
        return False
    mine = team_order_key(cycle.policy, job)
    return any(
        other.team == job.team
        and other.id != job.id
        and other.phase is JobPhase.PENDING
        and other.id not in cycle.holders
        and team_order_key(cycle.policy, other) < mine
        for other in cycle.snapshot.jobs
    )


def _held_back(cycle: _Cycle, job: JobView, hold: QuotaHold) -> Diagnostic:
    real = _attempts(cycle, job, cycle.book)
    if any(a.allocation is not None for a in real):
        diagnostic = Diagnostic(
            job.id,
            PendingReason.RESERVED_FOR_LARGER_GANG,
            f"team {job.team} holds quota for {hold.job}, which waits ahead of it; "
            "starting this job now would delay that one",
            {"held_for": str(hold.job)},
            (f"wait for {hold.job} to start",),
        )
    else:
        diagnostic = diagnose_waiting(
            job, real, cycle.ledger, None, cycle.book, cycle.holders.values()
        )
    cycle.diagnostics.append(diagnostic)
    return diagnostic


def _attempts(cycle: _Cycle, job: JobView, book: QuotaBook) -> list[Attempt]:
    snapshot = cycle.snapshot
    values = flavor_values(snapshot.tree, snapshot.flavor_label)
    ledger = cycle.ledger_for_others() if cycle.reserved else cycle.ledger
    attempts = []
    for flavor in flavors_for(job, book):
        workload = in_flavor(job.spec.workload, flavor, values, snapshot.flavor_label)
        if workload is None:
            continue
        attempt = try_flavor(job, flavor, book, ledger, workload)
        attempts.append(attempt)
        if attempt.allocation is not None:
            break
    return attempts


def _admit(cycle: _Cycle, job: JobView, allocation: Allocation) -> None:
    cycle.admissions.append(Admit(job.id, allocation))
    for node, resources in allocation.resources_on_node.items():
        index = cycle.ledger.tree.node_index[NodeName(node)]
        cycle.ledger.charge_node(index, cycle.ledger.tree.resource_vector(resources))
    for flavor, amount in allocation.usage.items():
        cycle.book.charge(job.team, flavor, amount)
    cycle.holders[job.id] = job


def _preempt_for(cycle: _Cycle, job: JobView, attempts: list[Attempt]) -> bool:
    values = flavor_values(cycle.snapshot.tree, cycle.snapshot.flavor_label)
    for attempt in attempts:
        workload = in_flavor(job.spec.workload, attempt.flavor, values, cycle.snapshot.flavor_label)
        if workload is None or attempt.quota.verdict is QuotaVerdict.UNKNOWN_TEAM:
            continue
        search = VictimSearch(job, attempt.flavor, workload)
        for cause, candidates, may_evict in _preemption_rules(cycle, job, attempt):
            victims = select_victims(cycle.ledger, cycle.book, search, candidates, may_evict)
            if victims:
                _issue_preemptions(cycle, job, victims, cause, attempt.flavor)
                return True
    return False


PreemptionRule = tuple[PreemptionCause, list[JobView], MayEvict]


def _preemption_rules(cycle: _Cycle, job: JobView, attempt: Attempt) -> Iterator[PreemptionRule]:
    """The candidates each rule allows, in the order the rules are tried."""
    flavor = attempt.flavor
    policy = cycle.policy
    team = policy.by_team.get(job.team)
    mine = priority_of(policy, job)
    running = [h for h in cycle.holders.values() if h.id not in cycle.evicting and _uses(h, flavor)]
    if team is not None and team.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY:
        lower = [h for h in running if h.team == job.team and priority_of(policy, h) < mine]
        yield PreemptionCause.PREEMPTED_FOR_PRIORITY, eviction_order(policy, lower), _always
    if job.team in cycle.losing_teams:
        return  # a team that just lost work to others takes none back in the same cycle
    running = [h for h in running if h.team not in cycle.gaining_teams]
    if attempt.quota.verdict is QuotaVerdict.WITHIN_GUARANTEE or _fits_guarantee(
        cycle, job, flavor
    ):
        borrowers = [
            h for h in running if h.team != job.team and cycle.book.borrowed(h.team, flavor)
        ]
        yield (
            PreemptionCause.PREEMPTED_FOR_RECLAIM,
            eviction_order(policy, borrowers),
            lambda victim, book: bool(book.borrowed(victim.team, flavor)),
        )
    elif policy.idle_allocation is IdleAllocation.FAIR_SHARE:
        after = cycle.book.copy()
        after.charge(job.team, flavor, total_demand(job))
        mine_after = dominant_share(after, job.team)
        richer = [
            h
            for h in running
            if h.team != job.team
            and cycle.book.borrowed(h.team, flavor)
            and _share_without(cycle.book, h) >= mine_after
        ]
        share = {team: dominant_share(cycle.book, team) for team in {h.team for h in richer}}
        richest_first = sorted(eviction_order(policy, richer), key=lambda h: -share[h.team])
        yield (
            PreemptionCause.PREEMPTED_FOR_FAIR_SHARE,
            richest_first,
            lambda victim, book: (
                bool(book.borrowed(victim.team, flavor))
                and _share_without(book, victim) >= mine_after
            ),
        )


def _share_without(book: QuotaBook, victim: JobView) -> float:
    """The victim's team's weighted share once the victim is gone: fair-share preemption only
    evicts while the victim's team stays at least as high as the preemptor's team will be, so
    the two never trade places back and forth."""
    trial = book.copy()
    if victim.allocation is not None:
        for flavor, amount in victim.allocation.usage.items():
            trial.release(victim.team, flavor, amount)
    return dominant_share(trial, victim.team)


def _always(victim: JobView, book: QuotaBook) -> bool:
    return True


def _uses(job: JobView, flavor: FlavorName) -> bool:
    return job.allocation is not None and flavor in job.allocation.usage


def _fits_guarantee(cycle: _Cycle, job: JobView, flavor: FlavorName) -> bool:
    book = cycle.book
    used = book.covered(flavor, book.used(job.team, flavor) + total_demand(job))
    return bool(used) and used.fits_in(book.guarantee(job.team, flavor))


def _issue_preemptions(
    cycle: _Cycle,
    job: JobView,
    victims: list[JobView],
    cause: PreemptionCause,
    flavor: FlavorName,
) -> None:
    """Record the evictions. In the quota book the victims' usage moves to the preemptor at
    once, so later jobs of this cycle neither evict again for the same need nor count on
    quota that is promised; on the nodes the victims keep their capacity until they stop."""
    names = ", ".join(victim.id for victim in victims)
    for victim in victims:
        if victim.allocation is not None:
            for victim_flavor, amount in victim.allocation.usage.items():
                cycle.book.release(victim.team, victim_flavor, amount)
    cycle.book.charge(job.team, flavor, total_demand(job))
    if cause is not PreemptionCause.PREEMPTED_FOR_PRIORITY:
        cycle.gaining_teams.add(job.team)
        cycle.losing_teams.update(victim.team for victim in victims)
    for victim in victims:
        cycle.evicting.add(victim.id)
        cycle.preemptions.append(
            Preempt(
                victim.id,
                job.id,
                cause,
                f"{cause.value}: evicted so that {job.id} (team {job.team}) fits",
            )
        )
    cycle.diagnostics.append(
        Diagnostic(
            job.id,
            PendingReason.WAITING_FOR_VICTIMS,
            f"waiting for {len(victims)} preempted job(s) to stop: {names}",
            {"victims": len(victims), "cause": cause.value},
        )
    )


def _shape(job: JobView) -> Hashable:
    """What decides where a job can go, without its name."""
    return workload_shape(job.spec.workload)


def _wait(cycle: _Cycle, job: JobView, attempts: list[Attempt]) -> Diagnostic:
    if job.team not in cycle.team_holds and attempts:
        first = attempts[0]
        quota_blocked = first.quota.verdict not in (
            QuotaVerdict.WITHIN_GUARANTEE,
            QuotaVerdict.BORROWING,
            QuotaVerdict.UNKNOWN_TEAM,
        )
        # a head waiting for quota holds its team's quota; one waiting for room holds a domain
        if quota_blocked and could_ever_run(cycle.book, cycle.snapshot.tree, job, first):
            cycle.team_holds[job.team] = QuotaHold(
                job.id, job.team, first.flavor, total_demand(job)
            )
    reserved_note = None
    if job.team not in cycle.reserving_teams:
        reservation = domain_to_reserve(cycle.ledger, job, attempts)
        if reservation is not None:
            cycle.reserved.append(reservation)
            cycle.reserving_teams.add(job.team)
            reserved_note = reservation[2]
    diagnostic = diagnose_waiting(
        job, attempts, cycle.ledger, reserved_note, cycle.book, cycle.holders.values()
    )
    cycle.diagnostics.append(diagnostic)
    return diagnostic
