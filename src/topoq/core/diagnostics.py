"""Why a job waits: a reason code, a message with the numbers, and what would change it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from topoq.core.admission import Attempt, never_fits
from topoq.core.holdings import total_demand
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.core.quota_wait import RunningWork, quota_numbers, quota_remedies
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import Diagnostic, PendingReason
from topoq.domain.governance import FlavorName
from topoq.domain.job import JobView
from topoq.domain.placement import PlacementResult

_QUOTA_REASONS = {
    QuotaVerdict.NO_QUOTA: PendingReason.WAITING_FOR_QUOTA,
    QuotaVerdict.BORROW_LIMIT: PendingReason.BORROW_LIMIT_REACHED,
    QuotaVerdict.NO_LENDER: PendingReason.NO_LENDER_HAS_ROOM,
    QuotaVerdict.UNKNOWN_TEAM: PendingReason.UNKNOWN_TEAM,
}
_QUOTA_REMEDIES = {
    QuotaVerdict.NO_QUOTA: (
        "wait for the team's running jobs to finish",
        "ask an admin for a larger guarantee or a LendAndBorrow strategy",
    ),
    QuotaVerdict.BORROW_LIMIT: (
        "wait for the team's running jobs to finish",
        "ask an admin to raise the team's borrow limit",
    ),
    QuotaVerdict.NO_LENDER: ("wait until other teams leave part of their guarantee unused",),
    QuotaVerdict.UNKNOWN_TEAM: ("submit to a team the policy defines and activates",),
}


def diagnose_waiting(
    job: JobView,
    attempts: list[Attempt],
    ledger: CapacityLedger,
    reserved_for: str | None,
    book: QuotaBook | None = None,
    running: Iterable[JobView] | RunningWork = (),
    fits: Callable[[CapacityLedger, Attempt], bool] | None = None,
) -> Diagnostic:
    """Why ``job`` waits. With the cycle's ``book`` (and the ``running`` jobs), a job no flavor
    could ever admit says so (``NEVER_FITS_CURRENT_POLICY``) and a wait for quota carries the
    team's numbers and the smallest changes that would admit it. ``fits``: whether an
    attempt's workload places on the ledger (the cycle shares those; placed here if not
    given)."""
    if book is not None:
        never = _never_fits(book, ledger.tree, job, attempts)
        if never is not None:
            return never
    for attempt in attempts:
        if attempt.placement is not None:
            return _topology(job, attempt, attempt.placement, ledger, reserved_for, fits)
    if not attempts:
        return Diagnostic(
            job.id,
            PendingReason.TOPOLOGY_UNSATISFIABLE,
            "no flavor of the cluster matches the job's node selectors",
        )
    first = attempts[0]
    verdict = first.quota.verdict
    numbers: dict[str, int | str] = dict(first.quota.numbers)
    remedies = _QUOTA_REMEDIES[verdict]
    if book is not None and verdict is not QuotaVerdict.UNKNOWN_TEAM:
        demand = total_demand(job)
        numbers |= quota_numbers(book, job.team, first.flavor, demand)
        found = quota_remedies(book, job, first.flavor, demand, verdict, running)
        remedies = found or remedies
    return Diagnostic(job.id, _QUOTA_REASONS[verdict], first.quota.message, numbers, remedies)


WaitIdentity = tuple[PendingReason, FlavorName | None, str | None]
"""What a wait is, without its message, numbers and remedies: the reason, the flavor it is
about, and what is held for it (``reserved_for``)."""


def waiting_reason(
    job: JobView,
    attempts: list[Attempt],
    ledger: CapacityLedger,
    book: QuotaBook,
    fits: Callable[[CapacityLedger, Attempt], bool],
    reserved_for: str | None = None,
) -> WaitIdentity:
    """What ``diagnose_waiting`` (with the cycle's ``book``) answers, without working out its
    message, numbers and remedies: the reason and the flavor it is about, by the same steps.
    ``fits``: whether an attempt's workload places on the ledger (the cycle shares those)."""
    if _never_fits(book, ledger.tree, job, attempts) is not None:
        return (PendingReason.NEVER_FITS_CURRENT_POLICY, attempts[0].flavor, None)
    for attempt in attempts:
        if attempt.placement is not None:
            if fits(ledger, attempt):
                return (PendingReason.RESERVED_FOR_LARGER_GANG, attempt.flavor, None)
            return (PendingReason.TOPOLOGY_UNSATISFIABLE, attempt.flavor, reserved_for)
    if not attempts:
        return (PendingReason.TOPOLOGY_UNSATISFIABLE, None, None)
    return (_QUOTA_REASONS[attempts[0].quota.verdict], attempts[0].flavor, None)


def _never_fits(
    book: QuotaBook, tree: TopologyTree, job: JobView, attempts: list[Attempt]
) -> Diagnostic | None:
    """``NEVER_FITS_CURRENT_POLICY`` when no flavor tried could ever admit the job; the
    message and numbers are the first flavor's (the team's own first)."""
    if not attempts or any(a.quota.verdict is QuotaVerdict.UNKNOWN_TEAM for a in attempts):
        return None
    reasons = []
    for attempt in attempts:
        reason = never_fits(book, tree, job, attempt.flavor, attempt.workload)
        if reason is None:
            return None
        reasons.append(reason)
    first = reasons[0]
    others = [f"{r.flavor}: {r.message}" for r in reasons[1:]]
    message = "; ".join([first.message, *others])
    return Diagnostic(
        job.id, PendingReason.NEVER_FITS_CURRENT_POLICY, message, first.numbers, first.remedies
    )


def _topology(
    job: JobView,
    attempt: Attempt,
    placement: PlacementResult,
    ledger: CapacityLedger,
    reserved_for: str | None,
    fits: Callable[[CapacityLedger, Attempt], bool] | None,
) -> Diagnostic:
    if fits(ledger, attempt) if fits is not None else _places(ledger, attempt):
        return Diagnostic(
            job.id,
            PendingReason.RESERVED_FOR_LARGER_GANG,
            "it fits only in capacity held for a larger gang that has waited longer",
            {"flavor": str(attempt.flavor)},
            ("wait for the larger gang to start",),
        )
    outcome, diagnosis = next(
        (o, o.diagnosis) for o in placement.pod_sets if o.diagnosis is not None
    )
    message = f"pod set {outcome.name}: {diagnosis.message}"
    numbers = dict(diagnosis.numbers) | {"flavor": str(attempt.flavor)}
    if reserved_for is not None:
        message += f"; holding {reserved_for} for it"
        numbers["reserved_domain"] = reserved_for
    return Diagnostic(
        job.id, PendingReason.TOPOLOGY_UNSATISFIABLE, message, numbers, diagnosis.relaxations
    )


def _places(ledger: CapacityLedger, attempt: Attempt) -> bool:
    return place_workload(ledger, attempt.workload)[0].admitted
