"""One scheduling cycle: ``schedule(snapshot) -> CycleResult``, a pure function.

1. Requeue gangs that lost a node.
2. Resolve dependencies: cancel what can never run, hold back what must wait.
3. Order pending work: within-guarantee first, then priority, fair-share position, submit time
   (re-evaluated after every admission, team heads first).
4. Hold capacity for jobs that waited longer than the starvation guard (nodes, and quota
   against other teams' borrowing), binding every job of the cycle but the holder.
5. For each job: quota, then topology-aware placement on the capacity left (held capacity only
   to backfill: ``topoq.core.backfill``); else topology-aware preemption (in-team priority,
   reclaim, fair share); else a hold for a blocked gang and a diagnostic that says why it
   waits, with its expected start where time limits allow computing it.

Victims still stopping (PREEMPTING) keep their nodes, are never chosen again, and their quota
counts for the pending job they were evicted for, which waits for them (WAITING_FOR_VICTIMS).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field

from topoq.core.admission import (
    Attempt,
    QuotaHold,
    flavors_for,
    in_flavor,
    try_flavor,
    workload_shape,
)
from topoq.core.backfill import (
    NodeHold,
    confined_to_unheld,
    may_backfill,
)
from topoq.core.dependencies import resolve_dependencies
from topoq.core.diagnostics import diagnose_waiting
from topoq.core.fair_share import fair_share_position
from topoq.core.holdings import (
    capacity_by_flavor,
    flavor_values,
    ledger_after,
    total_demand,
    usage_by_team,
)
from topoq.core.holds import (
    alike,
    backfill_remedy,
    hold_domain,
    hold_for_starving,
    hold_quota,
    with_backfill_hint,
    with_eta,
    within_guarantee,
)
from topoq.core.ledger import CapacityLedger
from topoq.core.ordering import eviction_order, pending_in_order, priority_of, team_order_key
from topoq.core.preemption import MayEvict, VictimSearch, select_victims
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.core.time_limits import time_limit_of
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
    upstream_phases: Mapping[JobId, JobPhase] = field(default_factory=dict)
    """The phase of each job a pending job depends on that is not in ``jobs`` (a shell that
    holds only unfinished jobs gives the finished ones here; ``core.dependencies``)."""
    fair_share_usage: Mapping[TeamName, float] = field(default_factory=dict)
    """Each team's decayed usage of borrowed capacity as of ``now`` (``core.fair_share``):
    part of its fair-share position. Empty: no history, only what teams borrow now."""


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
    stopping_for: dict[JobId, list[JobView]] = field(default_factory=dict)
    """The victims still stopping (PREEMPTING) of each pending preemptor."""
    reserved: list[NodeHold] = field(default_factory=list)
    """Nodes held for blocked gangs (a required domain, or a starving gang's nodes)."""
    reserving_teams: set[TeamName] = field(default_factory=set)
    eta_teams: set[TeamName] = field(default_factory=set)
    """Teams whose first waiting job was given an ETA (one per team per cycle)."""
    gaining_teams: set[TeamName] = field(default_factory=set)
    losing_teams: set[TeamName] = field(default_factory=set)
    """Teams that won or lost work to another team's preemption this cycle: neither is turned
    around in the same cycle, so work is not evicted only to be readmitted at once."""
    blocked_teams: set[TeamName] = field(default_factory=set)
    team_holds: dict[TeamName, QuotaHold] = field(default_factory=dict)
    """Quota held for each team's first waiting job (its queue head) against the team's own
    later jobs (and other teams' borrowing once it starves), so that smaller jobs cannot keep
    it waiting forever."""
    failed_shapes: dict[Hashable, Diagnostic] = field(default_factory=dict)
    """Jobs that could not be admitted nor make room, by (team, priority, shape): within a
    cycle capacity and quota only get used up, so an identical job fails the same way."""

    @property
    def policy(self) -> ClusterPolicy:
        return self.snapshot.policy

    def ledger_for(self, job: JobView) -> CapacityLedger:
        """The capacity left for ``job``: without the nodes held for other gangs, unless it
        may backfill into them (or runs within its guarantee and the gang would borrow)."""
        if not self.reserved:
            return self.ledger
        within = within_guarantee(self.book, job)
        binding = [
            hold
            for hold in self.reserved
            if hold.job != job.id
            and not (within and hold.borrowing)
            and not may_backfill(self.policy, job, self.snapshot.now, hold.expected_start)
        ]
        return confined_to_unheld(self.ledger, binding)

    def quota_holds_on(self, job: JobView) -> list[QuotaHold]:
        """The quota holds ``job`` must leave alone (it may backfill into the others)."""
        now = self.snapshot.now
        return [
            hold
            for hold in self.team_holds.values()
            if hold.binds(job) and not may_backfill(self.policy, job, now, hold.expected_start)
        ]

    def book_for(self, job: JobView) -> QuotaBook:
        """The books as ``job`` must see them: with the quota held from it taken."""
        book = self.book
        for hold in self.quota_holds_on(job):
            book = hold.applied_to(book)
        return book

    def attempts(self, job: JobView, book: QuotaBook) -> list[Attempt]:
        return _attempts(self, job, book)

    def running(self) -> list[JobView]:
        """The jobs holding capacity that are not being evicted."""
        return [h for h in self.holders.values() if h.id not in self.evicting]


@dataclass(frozen=True)
class Parking:
    """What one cycle leaves for the next (an immutable value the shell keeps between
    cycles and hands back): which waiting jobs' answers cannot change until a condition
    does. A cycle with a ``Parking`` decides exactly what it would decide without one."""


def schedule_with_parking(
    snapshot: Snapshot, parking: Parking | None = None
) -> tuple[CycleResult, Parking]:
    """One cycle that reconsiders only the jobs whose answer may have changed since the cycle
    that left ``parking``; the same decisions and reasons as ``schedule(snapshot)``."""
    return schedule(snapshot), Parking()


def schedule(snapshot: Snapshot) -> CycleResult:
    requeues = _requeue_lost_gangs(snapshot)
    requeued = {requeue.job for requeue in requeues}
    dependencies = resolve_dependencies(snapshot.jobs, snapshot.upstream_phases)
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
    _keep_room_for_preemptors(cycle)
    cycle.diagnostics.extend(dependencies.waiting)
    ready = []
    for job in snapshot.jobs:
        if job.phase is not JobPhase.PENDING or job.id in dependencies.blocked:
            continue
        if job.held:
            cycle.diagnostics.append(Diagnostic(job.id, PendingReason.HELD, "held by a user"))
            continue
        ready.append(job)
    hold_for_starving(cycle, ready)
    for job in pending_in_order(ready, cycle.book, snapshot.fair_share_usage):
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


def _keep_room_for_preemptors(cycle: _Cycle) -> None:
    """Victims being stopped are never chosen again; on the nodes they keep their capacity
    (they are holders) and in the quota book their usage counts for the pending job they were
    evicted for, as in the cycle that evicted them: no later job takes the promised quota,
    and the preemptor does not evict again for the same need."""
    pending = {job.id: job for job in cycle.snapshot.jobs if job.phase is JobPhase.PENDING}
    for victim in cycle.holders.values():
        if victim.phase is not JobPhase.PREEMPTING:
            continue
        cycle.evicting.add(victim.id)
        preemptor = pending.get(victim.preempted_for) if victim.preempted_for else None
        if preemptor is None or victim.allocation is None:
            continue
        cycle.stopping_for.setdefault(preemptor.id, []).append(victim)
        for flavor, amount in victim.allocation.usage.items():
            cycle.book.release(victim.team, flavor, amount)
            cycle.book.charge(preemptor.team, flavor, amount)


def _consider(cycle: _Cycle, job: JobView) -> None:
    stopping = cycle.stopping_for.get(job.id)
    if stopping:
        cycle.diagnostics.append(_waiting_for_victims(job, [v.id for v in stopping], {}))
        return
    if job.team in cycle.blocked_teams or _behind_strict_head(cycle, job):
        cycle.diagnostics.append(
            Diagnostic(
                job.id,
                PendingReason.BLOCKED_BY_QUEUE_HEAD,
                f"team {job.team} queues strict-fifo and an earlier job of the team is waiting",
            )
        )
        return
    limit = time_limit_of(cycle.policy, job)
    shape = (job.team, priority_of(cycle.policy, job), _shape(job), limit)
    known = cycle.failed_shapes.get(shape)
    if known is not None:
        cycle.diagnostics.append(alike(known, job))
    else:
        holds = cycle.quota_holds_on(job)
        attempts = _attempts(cycle, job, cycle.book_for(job))
        admitted = next((a for a in attempts if a.allocation is not None), None)
        if admitted is not None and admitted.allocation is not None:
            _admit(cycle, job, admitted.allocation)
            return
        own = next((h for h in holds if h.team == job.team), None)
        if own is not None or (holds and _fits_unheld(cycle, job)):
            cycle.failed_shapes[shape] = _held_back(cycle, job, own or holds[0])
        elif cycle.reserved and _fits_unheld(cycle, job, nodes_too=True):
            # only held nodes stand in its way: it waits for the gang, evicting nobody
            cycle.failed_shapes[shape] = _wait(cycle, job, attempts)
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


def _fits_unheld(cycle: _Cycle, job: JobView, *, nodes_too: bool = False) -> bool:
    """Whether the job would be admitted but for the quota holds (and, with ``nodes_too``,
    the node holds) of other jobs."""
    attempts = _attempts(cycle, job, cycle.book, cycle.ledger if nodes_too else None)
    return any(a.allocation is not None for a in attempts)


def _held_back(cycle: _Cycle, job: JobView, hold: QuotaHold) -> Diagnostic:
    real = _attempts(cycle, job, cycle.book)
    if any(a.allocation is not None for a in real):
        holder = (
            f"team {job.team} holds quota for {hold.job}, which waits ahead of it"
            if hold.team == job.team
            else f"quota is held for {hold.job} (team {hold.team}), which has waited longer "
            "than the starvation guard"
        )
        diagnostic = Diagnostic(
            job.id,
            PendingReason.RESERVED_FOR_LARGER_GANG,
            f"{holder}; starting this job now would delay that one",
            {"held_for": str(hold.job)},
            (f"wait for {hold.job} to start", *backfill_remedy(cycle, hold.expected_start)),
        )
    else:
        diagnostic = diagnose_waiting(
            job, real, cycle.ledger, None, cycle.book, cycle.holders.values()
        )
    cycle.diagnostics.append(diagnostic)
    return diagnostic


def _attempts(
    cycle: _Cycle, job: JobView, book: QuotaBook, ledger: CapacityLedger | None = None
) -> list[Attempt]:
    snapshot = cycle.snapshot
    values = flavor_values(snapshot.tree, snapshot.flavor_label)
    ledger = ledger or cycle.ledger_for(job)
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
    _release_holds_of(cycle, job)


def _release_holds_of(cycle: _Cycle, job: JobView) -> None:
    """A job admitted needs its holds no longer (a starving job holds before the loop and may
    be admitted in its turn): jobs after it see the capacity, and failures remembered while the
    hold stood are forgotten."""
    kept = [hold for hold in cycle.reserved if hold.job != job.id]
    quota = cycle.team_holds.get(job.team)
    if quota is not None and quota.job == job.id:
        del cycle.team_holds[job.team]
    elif len(kept) == len(cycle.reserved):
        return
    cycle.reserved = kept
    cycle.failed_shapes.clear()


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
        yield (
            PreemptionCause.PREEMPTED_FOR_RECLAIM,
            _reclaim_candidates(cycle.book, job, running, flavor),
            lambda victim, book: book.reclaimable(job.team, victim.team, flavor, total_demand(job)),
        )
    elif policy.idle_allocation is IdleAllocation.FAIR_SHARE:
        usage = cycle.snapshot.fair_share_usage
        after = cycle.book.copy()
        after.charge(job.team, flavor, total_demand(job))
        mine_after = fair_share_position(after, job.team, usage)
        richer = [
            h
            for h in running
            if h.team != job.team
            and cycle.book.borrowed(h.team, flavor)
            and _share_without(cycle.book, h, usage) >= mine_after
        ]
        share = {
            team: fair_share_position(cycle.book, team, usage) for team in {h.team for h in richer}
        }
        richest_first = sorted(eviction_order(policy, richer), key=lambda h: -share[h.team])
        yield (
            PreemptionCause.PREEMPTED_FOR_FAIR_SHARE,
            richest_first,
            lambda victim, book: (
                bool(book.borrowed(victim.team, flavor))
                and _share_without(book, victim, usage) >= mine_after
            ),
        )


def _reclaim_candidates(
    book: QuotaBook, job: JobView, running: list[JobView], flavor: FlavorName
) -> list[JobView]:
    """Work on capacity lent from the claimant's side of the cohort tree, the closest cohort
    first (work of its own cohort's borrowers before that of cousins), each in eviction order."""
    demand = total_demand(job)
    borrowers = [
        h
        for h in running
        if h.team != job.team and book.reclaimable(job.team, h.team, flavor, demand)
    ]
    ordered = eviction_order(book.policy, borrowers)
    return sorted(ordered, key=lambda h: -book.closeness(job.team, h.team))


def _share_without(book: QuotaBook, victim: JobView, usage: Mapping[TeamName, float]) -> float:
    """The victim's team's fair-share position once the victim is gone (its decayed usage
    stays: the past does not change): fair-share preemption only evicts while the victim's
    team stays at least as high as the preemptor's team will be, so the two never trade
    places back and forth."""
    trial = book.copy()
    if victim.allocation is not None:
        for flavor, amount in victim.allocation.usage.items():
            trial.release(victim.team, flavor, amount)
    return fair_share_position(trial, victim.team, usage)


def _always(victim: JobView, book: QuotaBook) -> bool:
    return True


def _uses(job: JobView, flavor: FlavorName) -> bool:
    return job.allocation is not None and flavor in job.allocation.usage


def _fits_guarantee(cycle: _Cycle, job: JobView, flavor: FlavorName) -> bool:
    """Within its team's guarantee, or within that of a cohort on its path with its own."""
    book, demand = cycle.book, total_demand(job)
    used = book.covered(flavor, book.used(job.team, flavor) + demand)
    if not used:
        return False
    own = used.fits_in(book.guarantee(job.team, flavor))
    return own or book.within_cohort_guarantee(job.team, flavor, demand)


def _issue_preemptions(
    cycle: _Cycle,
    job: JobView,
    victims: list[JobView],
    cause: PreemptionCause,
    flavor: FlavorName,
) -> None:
    """Record the evictions. In the quota book the victims' usage moves to the preemptor at
    once, so later jobs of this cycle neither evict again for the same need nor count on
    quota that is promised; on the nodes the victims keep their capacity until they stop
    (and across cycles too: ``_keep_room_for_preemptors``)."""
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
        _waiting_for_victims(job, [victim.id for victim in victims], {"cause": cause.value})
    )


def _waiting_for_victims(
    job: JobView, victims: list[JobId], details: dict[str, str | int]
) -> Diagnostic:
    """The preemptor waits until its victims' pods are gone; the room is kept for it."""
    names = ", ".join(victims)
    return Diagnostic(
        job.id,
        PendingReason.WAITING_FOR_VICTIMS,
        f"waiting for {len(victims)} preempted job(s) to stop: {names}",
        {"victims": len(victims), "stopping": names, **details},
    )


def _shape(job: JobView) -> Hashable:
    """What decides where a job can go, without its name."""
    return workload_shape(job.spec.workload)


def _wait(cycle: _Cycle, job: JobView, attempts: list[Attempt]) -> Diagnostic:
    hold_quota(cycle, job, attempts)
    reserved_note = None
    if job.team not in cycle.reserving_teams:
        hold = hold_domain(cycle, job, attempts)
        if hold is not None:
            cycle.reserved.append(hold)
            cycle.reserving_teams.add(job.team)
            reserved_note = hold.name
    diagnostic = diagnose_waiting(
        job, attempts, cycle.ledger, reserved_note, cycle.book, cycle.holders.values()
    )
    diagnostic = with_eta(cycle, job, attempts, with_backfill_hint(cycle, job, diagnostic))
    cycle.diagnostics.append(diagnostic)
    return diagnostic
