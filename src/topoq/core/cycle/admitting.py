"""One job's turn in a cycle: admitted, or why it waits (and what is held for it).

In order: a preemptor whose victims are still stopping waits for them; a job behind a
strict-fifo head waits; a job of a class that already failed this cycle fails alike; else
quota, then topology-aware placement on the capacity left (held capacity only to backfill);
else, when only holds stand in its way, it waits for them; else preemption
(``cycle.preempting``); else a hold for a blocked gang and a diagnostic that says why it
waits, with its expected start where time limits allow computing it.
"""

from __future__ import annotations

from topoq.core.admission import Attempt, QuotaHold
from topoq.core.cycle.preempting import (
    Search,
    preempt_for,
    waiting_for_victims,
    with_search_deferred,
)
from topoq.core.cycle.state import CycleState, Failure
from topoq.core.diagnostics import WaitIdentity, diagnose_waiting, waiting_reason
from topoq.core.holds import (
    alike,
    backfill_remedy,
    hold_domain,
    hold_quota,
    with_backfill_hint,
    with_eta,
)
from topoq.core.ledger import CapacityLedger
from topoq.core.ordering import team_order_key
from topoq.core.quota import QuotaBook
from topoq.domain.decisions import Diagnostic, PendingReason
from topoq.domain.governance import TeamName
from topoq.domain.job import JobPhase, JobView


def consider(cycle: CycleState, job: JobView, job_class: int | None = None) -> None:
    """The job's turn (``job_class``: its class's number, when the caller knows it)."""
    team = job.team
    if (
        team not in cycle.strict_teams
        and not cycle.stopping_for
        and cycle.waits_as_known(job, job_class)
    ):
        return  # its class failed before it this cycle: it waits alike (the common case)
    stopping = cycle.stopping_for.get(job.id)
    if stopping:
        cycle.decide_wait(waiting_for_victims(job, [v.id for v in stopping], {}))
        return
    if team in cycle.blocked_teams or _behind_strict_head(cycle, job):
        cycle.decide_wait(
            Diagnostic(
                job.id,
                PendingReason.BLOCKED_BY_QUEUE_HEAD,
                f"team {job.team} queues strict-fifo and an earlier job of the team is waiting",
            )
        )
        return
    if job_class is None:
        job_class = cycle.class_number(job)
    known = cycle.known_failure(job_class)
    if known is None:
        failure = _first_try(cycle, job, job_class)
        if failure is not None:
            cycle.remember_failure(job_class, *failure)
    else:
        cycle.wait_alike(job, known)
    if _strict(cycle, job.team):
        cycle.blocked_teams.add(job.team)


def _first_try(cycle: CycleState, job: JobView, job_class: int) -> Failure | None:
    """Admit the job (of class number ``job_class``), make room for it, or say why it waits
    (None: admitted or room made)."""
    holds = cycle.quota_holds_on(job)
    capacity = cycle.ledger_for(job)  # no hold is made before the job waits
    own = next((h for h in holds if h.team == job.team), None)
    held_back = cycle.held_back_alike(job, holds, capacity)
    if held_back.failure is not None:  # as a job of its team and shape (of another priority)
        return cycle.wait_alike(job, held_back.failure)
    if held_back.key is not None:  # nothing is held for it
        parked = cycle.parked_failure(job, holds, job_class)  # on its team's figures
        if parked is not None:
            cycle.share_held_back(held_back, parked)
            cycle.held_back_at_every_priority(job, parked)
            return parked
    attempts = cycle.attempts(job, cycle.book_for(job, holds), capacity)
    admitted = next((a for a in attempts if a.allocation is not None), None)
    if admitted is not None and admitted.allocation is not None:
        cycle.admit(job, admitted.allocation)
        return None
    if own is not None or (holds and cycle.would_admit(job, cycle.book, capacity)):
        failure = _held_back(cycle, job, own or holds[0], capacity)
        cycle.share_held_back(held_back, failure)
        if own is not None and held_back.key is not None:
            cycle.held_back_at_every_priority(job, failure)
        return failure
    if cycle.reserved and _fits_unheld(cycle, job):
        # only held nodes stand in its way: it waits for the gang, evicting nobody
        return _wait(cycle, job, attempts)
    searched = preempt_for(cycle, job, attempts)
    if searched is Search.PREEMPTED:
        return None
    return _wait(cycle, job, attempts, searched is Search.DEFERRED)


def _strict(cycle: CycleState, team: TeamName) -> bool:
    return team in cycle.strict_teams


def _behind_strict_head(cycle: CycleState, job: JobView) -> bool:
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


def _fits_unheld(cycle: CycleState, job: JobView) -> bool:
    """Whether the job would be admitted but for the quota and node holds of other jobs."""
    return cycle.would_admit(job, cycle.book, cycle.ledger)


def _held_back(
    cycle: CycleState, job: JobView, hold: QuotaHold, capacity: CapacityLedger
) -> Failure:
    """Why a job that quota ``hold`` binds waits (``capacity``: what ``ledger_for`` leaves it).
    A job that would be admitted but for the holds — quota and nodes held for other gangs —
    waits for the quota hold, whether or not nodes held for a gang stand in its way too: both
    keep it waiting, and the quota hold, unlike node holds, does not move to wherever a job
    just ended, so its wait does not flip from step to step as those do (ADR 0007)."""
    if cycle.would_admit(job, cycle.book, cycle.ledger):
        backfill = backfill_remedy(cycle, _backfill_before(cycle, job, hold, capacity))
        held = _held_identity(hold, backfill)
        diagnostic = cycle.parked_wait(job, held) or _held_for(job, hold, backfill)
        cycle.note_wait(job.id, held, diagnostic)
        cycle.decide_wait(diagnostic)
        return diagnostic, held
    real = cycle.attempts(job, cycle.book, capacity)
    identity = waiting_reason(job, real, cycle.ledger, cycle.book, cycle.fits)
    diagnostic = cycle.parked_wait(job, identity) or _diagnosed(
        cycle, job, real, cycle.ledger, None, cycle.book
    )
    cycle.note_wait(job.id, identity, diagnostic)
    cycle.decide_wait(diagnostic)
    if hold.team == job.team:
        cycle.park_class(job, real, identity)
    return diagnostic, identity


def _backfill_before(
    cycle: CycleState, job: JobView, hold: QuotaHold, capacity: CapacityLedger
) -> float | None:
    """When a job held back by ``hold`` must end to backfill: before the hold's job is
    expected to start and, when it fits only in nodes held for gangs, before every such gang
    is (None: not known)."""
    if cycle.would_admit(job, cycle.book, capacity):
        return hold.expected_start
    starts = [hold.expected_start, *(h.expected_start for h in cycle.reserved if h.job != job.id)]
    return None if None in starts else min(start for start in starts if start is not None)


def _held_identity(hold: QuotaHold, backfill: tuple[str, ...]) -> WaitIdentity:
    """The identity of the wait ``_held_for`` says: everything its message, numbers and
    remedies follow from (whose hold, of which team, and the backfill remedy), so that a job
    that waits so again keeps its diagnostic."""
    return (
        PendingReason.RESERVED_FOR_LARGER_GANG,
        None,
        "; ".join((hold.team, hold.job, *backfill)),
    )


def _held_for(job: JobView, hold: QuotaHold, backfill: tuple[str, ...]) -> Diagnostic:
    """Why a job that would be admitted but for quota ``hold`` waits."""
    holder = (
        f"team {job.team} holds quota for {hold.job}, which waits ahead of it"
        if hold.team == job.team
        else f"quota is held for {hold.job} (team {hold.team}), which has waited longer "
        "than the starvation guard"
    )
    return Diagnostic(
        job.id,
        PendingReason.RESERVED_FOR_LARGER_GANG,
        f"{holder}; starting this job now would delay that one",
        {"held_for": str(hold.job)},
        (f"wait for {hold.job} to start", *backfill),
    )


def _diagnosed(
    cycle: CycleState,
    job: JobView,
    attempts: list[Attempt],
    ledger: CapacityLedger,
    reserved_note: str | None,
    book: QuotaBook,
) -> Diagnostic:
    """``diagnose_waiting``, shared by the jobs of a team that tried alike until the books
    change (the same quota checks and placements, on the same ledger and books: the answer
    depends on nothing else of the job)."""
    key = (
        "diagnose",
        job.team,
        cycle.shape_of(job.spec.workload),
        reserved_note,
        id(ledger),
        id(book),
        *((a.flavor, id(a.quota), id(a.placement)) for a in attempts),
    )
    shared = cycle.shared_on(
        (attempts, ledger, book),
        key,
        lambda: diagnose_waiting(
            job, attempts, ledger, reserved_note, book, cycle.running_work, cycle.fits
        ),
    )
    return alike(shared, job) if shared.job != job.id else shared


def _wait(
    cycle: CycleState, job: JobView, attempts: list[Attempt], deferred: bool = False
) -> Failure:
    """A waiting job holds what its rules let it hold (its team's quota as queue head, a
    domain of its required level) and learns its expected start: both worked out every cycle;
    why it waits is kept while its reason stands, as for any wait."""
    holds = cycle.snapshot.holds_for_waiting
    if holds:
        hold_quota(cycle, job, attempts)
    reserved_note = None
    if holds and job.team not in cycle.reserving_teams:
        hold = hold_domain(cycle, job, attempts)
        if hold is not None:
            cycle.hold_nodes(hold, job.team)
            reserved_note = hold.name
    ledger, book = cycle.ledger, cycle.book
    identity = waiting_reason(job, attempts, ledger, book, cycle.fits, reserved_note)
    diagnostic = cycle.parked_wait(job, identity) or _diagnosed(
        cycle, job, attempts, ledger, reserved_note, book
    )
    cycle.note_wait(job.id, identity, diagnostic)  # before its ETA and hints, new each cycle
    diagnostic = with_eta(cycle, job, attempts, with_backfill_hint(cycle, job, diagnostic))
    if deferred:
        diagnostic = with_search_deferred(diagnostic)
    cycle.decide_wait(diagnostic)
    return diagnostic, identity  # the later jobs of its class wait as it does
