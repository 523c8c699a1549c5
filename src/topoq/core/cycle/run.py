"""The cycle as numbered phases: ``schedule(snapshot) -> CycleResult``, a pure function.

1. Requeue gangs that lost a node.
2. Resolve dependencies: cancel what can never run, hold back what must wait.
3. Book what holds capacity; victims still stopping (PREEMPTING) keep their nodes, are never
   chosen again, and their quota counts for the pending job they were evicted for, which
   waits for them (WAITING_FOR_VICTIMS).
4. Line the ready jobs up in their teams' queues (the last cycle's lineup brought up to date)
   and hold capacity for jobs that waited longer than the starvation guard (nodes, and quota
   against other teams' borrowing), binding every job of the cycle but the holder.
5. Order pending work: within-guarantee first, then priority, fair-share position, submit time
   (re-evaluated after every admission, team heads first), and give each job its turn
   (``cycle.admitting``); a team whose jobs left are all of classes that failed leaves the
   order, its jobs waiting as their classes did.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoq.core.cycle.admitting import consider
from topoq.core.cycle.by_phase import JobsByPhase
from topoq.core.cycle.preempting import TRIAL_PLACEMENTS_PER_CYCLE
from topoq.core.cycle.snapshot import Snapshot
from topoq.core.cycle.state import Carried, CycleState
from topoq.core.dependencies import resolve_dependencies
from topoq.core.holdings import PreparedLedger, capacity_by_flavor, prepared_ledger
from topoq.core.holds import hold_for_starving
from topoq.core.ordering import pending_in_line
from topoq.core.placement.packing import packing_for
from topoq.core.quota import QuotaBook
from topoq.core.tree import ExclusionReason
from topoq.domain.decisions import CycleResult, Diagnostic, PendingReason, Requeue, RequeueCause
from topoq.domain.job import JobId, JobView


def schedule(snapshot: Snapshot) -> CycleResult:
    return run_cycle(snapshot)[0]


def schedule_until(snapshot: Snapshot, job: JobId) -> CycleResult:
    """The cycle up to and including ``job``'s turn, every wait worked out afresh: what it
    decides for ``job`` is what ``schedule`` decides (the jobs after it cannot change that),
    at the cost of the jobs before it (``topoq explain``)."""
    return run_cycle(snapshot, until=job)[0]


def run_cycle(
    snapshot: Snapshot,
    carried: Carried | None = None,
    until: JobId | None = None,
    trial_placements: int = TRIAL_PLACEMENTS_PER_CYCLE,
    *,
    settle_teams: bool = True,
    held_back_across_priorities: bool = True,
) -> tuple[CycleResult, Carried]:
    """The cycle, and what it hands to the next. ``carried``: what the last cycle (on the same
    policy and tree) handed on: a job that waits the same way keeps its diagnostic (ADR
    0007), and a job that is the very same object keeps its class. ``settle_teams``: a team
    whose jobs left are all of classes that failed leaves the order, its jobs waiting as their
    classes did (``CycleState.settle_rest``; the same decisions and diagnostics as handing
    each out, listed sooner). ``held_back_across_priorities``: a job held back by its own
    team's quota hold fails for its team's jobs of the same shape and time limit at every
    priority (``CycleState.held_back_at_every_priority``; the same decisions as trying the
    first job of each priority)."""
    jobs = snapshot.by_phase or JobsByPhase(snapshot.jobs)
    before = carried.prepared if carried is not None else None
    holders = dict(jobs.holding)  # the cycle's own: admissions join it (``CycleState.admit``)
    prepared = prepared_ledger(snapshot.tree, holders.values(), before)
    requeues = _requeue_lost_gangs(snapshot, holders, prepared)  # 1
    if requeues:
        requeued = {requeue.job for requeue in requeues}
        holders = {job_id: job for job_id, job in holders.items() if job_id not in requeued}
        prepared = prepared_ledger(snapshot.tree, holders.values(), before)
    dependencies = resolve_dependencies(  # 2
        snapshot.jobs, snapshot.upstream_phases, dependents=jobs.dependents
    )
    books = _books(snapshot, prepared, before, carried.books if carried is not None else None)
    ledger = prepared.ledger()
    if snapshot.packs_by_fragmentation:
        ledger.packing = packing_for(
            snapshot.tree,
            (
                (pod_set, pod_set.count)
                for job in snapshot.jobs
                for pod_set in job.spec.workload.pod_sets
            ),
        )
    cycle = CycleState(  # 3
        snapshot,
        ledger,
        books.copy(),
        holders,
        carried,
        trial_placements,
        prepared,
        held_back_across_priorities=held_back_across_priorities,
        books=books,
    )
    _keep_room_for_preemptors(cycle, [job for job in jobs.preempting if job.id in holders], jobs)
    cycle.diagnostics.extend(dependencies.waiting)
    blocked = dependencies.blocked
    for job in jobs.held:
        if job.id not in blocked:
            cycle.decide_wait(Diagnostic(job.id, PendingReason.HELD, "held by a user"))
    ready = [job for job in jobs.ready if job.id not in blocked] if blocked else jobs.ready
    lineup = cycle.line_up(ready)
    cycle.guard_passes_after = (  # 4
        hold_for_starving(cycle, lineup.starving) if snapshot.holds_for_waiting else ()
    )
    cycle.start_order()
    for facts, job in pending_in_line(
        lineup,
        cycle.book,
        snapshot.fair_share_usage,
        lambda: cycle.epoch,
        cycle.settle_rest if settle_teams and until is None else None,
        cycle.passer if settle_teams and until is None else None,
    ):  # 5
        cycle.hand_out(job)
        consider(cycle, job, facts.alike)  # the number of its class
        if job.id == until:
            break
    result = CycleResult(
        admissions=tuple(cycle.admissions),
        preemptions=tuple(cycle.preemptions),
        requeues=tuple(requeues),
        cancellations=dependencies.cancellations,
        diagnostics=tuple(cycle.diagnostics),
    )
    return result, cycle.carried(complete=until is None)


def _books(
    snapshot: Snapshot,
    prepared: PreparedLedger,
    before: PreparedLedger | None,
    books_before: QuotaBook | None,
) -> QuotaBook:
    """The quota books of the holders' usage, nothing charged: derived by the teams whose
    usage moved from the last cycle's (``books_before``, the books of ``before``'s usage,
    handed on on the same policy and tree: ``Carried``), else counted afresh."""
    if books_before is not None and before is not None:
        return books_before.following(before.sums, prepared.sums)
    capacity = capacity_by_flavor(snapshot.tree, snapshot.flavor_label)
    return QuotaBook(snapshot.policy, capacity, prepared.usage_by_team()).counted()


def _requeue_lost_gangs(
    snapshot: Snapshot, holding: Mapping[JobId, JobView], prepared: PreparedLedger
) -> list[Requeue]:
    """The gangs among ``holding`` (the jobs that hold capacity) that lost a node. Only
    those that came or moved since the last cycle's ledger (``prepared.came``) are looked
    at when ``prepared`` was derived from it: the others held the very same allocations
    then, on the very same tree (a tree's nodes never change), and were found whole."""
    tree = snapshot.tree
    looked_at = (
        holding.values() if prepared.came is None else [holding[job_id] for job_id in prepared.came]
    )
    known_nodes = tree.memo("nodes standing, failed, known")
    if not isinstance(known_nodes, tuple):
        failed = frozenset(e.name for e in tree.excluded if e.reason is ExclusionReason.NOT_READY)
        known = frozenset(tree.node_index) | {e.name for e in tree.excluded}
        known_nodes = (known - failed, failed, known)
        tree.remember("nodes standing, failed, known", known_nodes)
    standing, failed, known = known_nodes
    requeues = []
    for job in looked_at:
        allocation = job.allocation
        if allocation is None or allocation.nodes <= standing:
            continue  # every node of the gang is still there and not failed: most gangs
        lost = sorted(n for n in allocation.nodes if n in failed or n not in known)
        if lost:
            requeues.append(
                Requeue(
                    job.id,
                    RequeueCause.NODE_FAILED,
                    f"node {lost[0]} of the gang failed; the gang is requeued",
                )
            )
    return requeues


def _keep_room_for_preemptors(
    cycle: CycleState, stopping: list[JobView], jobs: JobsByPhase
) -> None:
    """Victims being stopped are never chosen again; on the nodes they keep their capacity
    (they are holders) and in the quota book their usage counts for the pending job they were
    evicted for, as in the cycle that evicted them: no later job takes the promised quota,
    and the preemptor does not evict again for the same need. ``stopping``: the holders
    being preempted; ``jobs``: the snapshot's, sorted out."""
    if not stopping:
        return
    by_id = {job.id: job for job in (*jobs.ready, *jobs.held)}
    for victim in stopping:
        cycle.evict(victim)
        preemptor = by_id.get(victim.preempted_for) if victim.preempted_for else None
        if preemptor is None or victim.allocation is None:
            continue
        cycle.stopping_for.setdefault(preemptor.id, []).append(victim)
        for flavor, amount in victim.allocation.usage.items():
            cycle.release_quota(victim.team, flavor, amount)
            cycle.charge_quota(preemptor.team, flavor, amount)
