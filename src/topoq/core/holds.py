"""The holds a cycle makes for waiting jobs and what it says about them: the starvation
guard's holds (before any job is considered), a queue head's quota hold, a required level's
domain hold, the expected start of each, the ETA of each team's first waiting job, and the
hint a job kept out of held capacity gets. The rules: ``topoq.core.backfill``, ADR 0006."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Protocol

import numpy as np

from topoq.core.admission import Attempt, QuotaHold, could_ever_run, flavors_for
from topoq.core.backfill import (
    Ending,
    NodeHold,
    capacity_to_hold,
    node_free_times,
    nodes_to_hold,
    quota_free_at,
    whole_nodes,
)
from topoq.core.eta import ETA_KEY, expected_start
from topoq.core.holdings import total_demand
from topoq.core.ledger import CapacityLedger
from topoq.core.ordering import OrderKey, Starving, groups_in_key_order
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.core.reservation import domain_to_reserve
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import Diagnostic, PendingReason
from topoq.domain.durations import format_duration
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobView


class Instant(Protocol):
    @property
    def now(self) -> float: ...

    @property
    def tree(self) -> TopologyTree: ...

    @property
    def fair_share_usage(self) -> Mapping[TeamName, float]: ...


class HoldingCycle(Protocol):
    """What of a cycle's working state the holds read and extend (``cycle.state``)."""

    @property
    def snapshot(self) -> Instant: ...

    @property
    def policy(self) -> ClusterPolicy: ...

    ledger: CapacityLedger
    book: QuotaBook
    holders: dict[JobId, JobView]
    reserved: list[NodeHold]
    reserving_teams: set[TeamName]
    team_holds: dict[TeamName, QuotaHold]
    eta_teams: set[TeamName]

    def hold_nodes(self, hold: NodeHold, team: TeamName) -> None: ...

    def hold_team_quota(self, hold: QuotaHold) -> None: ...

    def ending(self) -> list[Ending]: ...

    def ledger_for(self, job: JobView) -> CapacityLedger: ...

    def book_for(self, job: JobView) -> QuotaBook: ...

    def running(self) -> list[JobView]: ...

    def attempts(self, job: JobView, book: QuotaBook) -> list[Attempt]: ...


def alike(known: Diagnostic, job: JobView) -> Diagnostic:
    """An earlier job's diagnostic for ``job`` of the same shape (its ETA is the earlier
    job's, so it is left out)."""
    numbers = known.numbers
    if ETA_KEY in numbers:
        numbers = {key: value for key, value in numbers.items() if key != ETA_KEY}
    return Diagnostic(job.id, known.reason, known.message, numbers, known.remedies)


def with_eta(
    cycle: HoldingCycle, job: JobView, attempts: list[Attempt], diagnostic: Diagnostic
) -> Diagnostic:
    """The diagnostic with the job's ETA (``eta_at``) where one can be computed: a job that
    holds capacity, its holds' expected start; a team's first waiting job, a lower bound."""
    if holds_for(cycle, job):
        expected = expected_start_of(cycle, job)
    else:
        expected = team_head_eta(cycle, job, attempts)
    if expected is None:
        return diagnostic
    return replace(diagnostic, numbers=dict(diagnostic.numbers) | {ETA_KEY: math.ceil(expected)})


def holds_for(cycle: HoldingCycle, job: JobView) -> bool:
    quota = cycle.team_holds.get(job.team)
    return (quota is not None and quota.job == job.id) or any(
        hold.job == job.id for hold in cycle.reserved
    )


def team_head_eta(cycle: HoldingCycle, job: JobView, attempts: list[Attempt]) -> float | None:
    """A lower bound of the start of a team's first waiting job that holds nothing."""
    if job.team in cycle.eta_teams or not attempts:
        return None
    cycle.eta_teams.add(job.team)
    attempt = next((a for a in attempts if a.quota.verdict.admissible), attempts[0])
    if attempt.quota.verdict is QuotaVerdict.UNKNOWN_TEAM:
        return None
    now = cycle.snapshot.now
    ending = cycle.ending()
    expected = expected_start(cycle.ledger_for(job), cycle.book_for(job), job, attempt, ending, now)
    return expected if expected is not None and expected > now else None  # no job ahead ends


def with_backfill_hint(cycle: HoldingCycle, job: JobView, diagnostic: Diagnostic) -> Diagnostic:
    """A job kept out of held nodes learns which gang holds them and the time limit that
    would let it backfill."""
    others = [h for h in cycle.reserved if h.job != job.id]
    if diagnostic.reason is not PendingReason.RESERVED_FOR_LARGER_GANG or not others:
        return diagnostic
    first = min(others, key=lambda h: (h.expected_start is None, h.expected_start or 0.0))
    return replace(
        diagnostic,
        numbers=dict(diagnostic.numbers) | {"held_for": str(first.job)},
        remedies=(*diagnostic.remedies, *backfill_remedy(cycle, first.expected_start)),
    )


def expected_start_of(cycle: HoldingCycle, job: JobView) -> float | None:
    """When what is held for ``job`` is expected to be free: the latest of its holds (None:
    nothing is held for it, or it waits for a job without a time limit)."""
    starts = [h.expected_start for h in cycle.reserved if h.job == job.id]
    quota = cycle.team_holds.get(job.team)
    if quota is not None and quota.job == job.id:
        starts.append(quota.expected_start)
    if not starts or any(start is None for start in starts):
        return None
    return max(start for start in starts if start is not None)


def hold_for_starving(
    cycle: HoldingCycle,
    starving: Mapping[Hashable, list[Starving]],
) -> OrderKey | None:
    """Before any job is considered, the first starving job that may ever run
    (``MAX_STARVING_HOLDS``), in the order the cycle considers jobs — within guarantee first,
    then priority, fair-share position, submission (``ordering.next_job_keys`` on the books as
    the cycle starts) — holds what it needs, so that no job of the cycle, considered before or
    after it, takes that: its quota against other teams' borrowing when it may borrow, and the
    capacity its placement takes at its expected start once its quota allows it. It is
    admitted in its turn as any job. Choosing in the cycle's order keeps the guard from
    overriding fair share: of two starving teams, the one fair share serves first is held for.
    ``starving``: the starving jobs of each kind, in submission order
    (``ordering.Lineup.starving``). Returns the key in that order of the job whose hold was
    the last one made (None: fewer than ``MAX_STARVING_HOLDS`` were made): a job that starts
    starving later changes none of this if its key comes after that one."""
    holding = 0
    policy, usage = cycle.policy, cycle.snapshot.fair_share_usage
    if policy.starvation_guard_s <= 0:
        return None
    last: OrderKey | None = None
    # in order lazily: most cycles hold for the first one or two, of thousands starving
    for key, job in groups_in_key_order(starving, cycle.book, usage):
        if holding == MAX_STARVING_HOLDS:
            break
        attempts = cycle.attempts(job, cycle.book_for(job))
        attempt = next((a for a in attempts if a.quota.verdict.admissible), None)
        if attempt is None:
            attempt = attempts[0] if attempts else None
        if attempt is None or not could_ever_run(cycle.book, cycle.snapshot.tree, job, attempt):
            continue
        verdict = attempt.quota.verdict
        if job.team not in cycle.team_holds and verdict in _MAY_BORROW:
            cycle.hold_team_quota(
                QuotaHold(
                    job.id,
                    job.team,
                    attempt.flavor,
                    total_demand(job),
                    across_teams=True,
                    expected_start=_quota_free_at(cycle, job, attempt),
                )
            )
            held = True
        else:
            held = False
        if job.team not in cycle.reserving_teams and verdict.admissible:
            hold = _starving_node_hold(cycle, job, attempt)
            if hold is not None:
                cycle.hold_nodes(hold, job.team)
                held = True
        holding += held  # one waiting only for its own team's quota holds nothing here
        last = key
    return last if holding == MAX_STARVING_HOLDS else None


def _starving_node_hold(cycle: HoldingCycle, job: JobView, attempt: Attempt) -> NodeHold | None:
    """What the starving job's placement takes at its expected start, or — when it waits for
    a job without a time limit — the fewest whole nodes expected to free earliest."""
    now = cycle.snapshot.now
    borrowing = attempt.quota.verdict is QuotaVerdict.BORROWING
    ending = cycle.ending()
    found = capacity_to_hold(cycle.ledger_for(job), ending, attempt.workload, now)
    if found is not None:
        nodes, amounts, expected = found
        return NodeHold(job.id, nodes, amounts, f"{len(nodes)} node(s)", expected, borrowing)
    tree = cycle.snapshot.tree
    free_at = node_free_times(tree, cycle.running(), cycle.policy, now)
    whole = nodes_to_hold(tree, np.arange(len(tree.nodes)), free_at, attempt.workload)
    if whole is None:
        return None
    nodes = whole[0]
    name = f"{len(nodes)} node(s)"
    return NodeHold(job.id, nodes, whole_nodes(tree, nodes), name, None, borrowing)


MAX_STARVING_HOLDS = 1
"""Starving jobs that hold capacity in one cycle: the first by priority and submission. One
at a time protects each in turn without idling capacity for many at once."""

_MAY_BORROW = (QuotaVerdict.BORROWING, QuotaVerdict.NO_LENDER)
"""Verdicts of a job that may borrow: other teams' borrowing is what can starve it."""


def _quota_free_at(cycle: HoldingCycle, job: JobView, attempt: Attempt) -> float | None:
    now = cycle.snapshot.now
    ending = cycle.ending()
    return quota_free_at(cycle.book, job, attempt.flavor, ending, now)


def hold_quota(cycle: HoldingCycle, job: JobView, attempts: list[Attempt]) -> None:
    """A team's first job waiting for quota holds it against the team's later jobs."""
    if job.team in cycle.team_holds or not attempts:
        return
    first = attempts[0]
    quota_blocked = first.quota.verdict not in (
        QuotaVerdict.WITHIN_GUARANTEE,
        QuotaVerdict.BORROWING,
        QuotaVerdict.UNKNOWN_TEAM,
    )
    if quota_blocked and could_ever_run(cycle.book, cycle.snapshot.tree, job, first):
        expected = _quota_free_at(cycle, job, first)
        cycle.hold_team_quota(
            QuotaHold(job.id, job.team, first.flavor, total_demand(job), expected_start=expected)
        )


def hold_domain(cycle: HoldingCycle, job: JobView, attempts: list[Attempt]) -> NodeHold | None:
    """A gang with quota but no room in any domain of its required level holds the domain
    closest to fitting, expected to start once the fewest earliest-freeing nodes of it that
    fit the gang are free."""
    domain = domain_to_reserve(cycle.ledger, job, attempts)
    blocked = next(
        (a for a in attempts if a.placement is not None and not a.placement.admitted), None
    )
    if domain is None or blocked is None:
        return None
    start, end, name = domain
    now = cycle.snapshot.now
    ending = cycle.ending()
    found = capacity_to_hold(cycle.ledger, ending, blocked.workload, now, (start, end))
    nodes = np.arange(start, end)
    borrowing = blocked.quota.verdict is QuotaVerdict.BORROWING
    amounts = whole_nodes(cycle.snapshot.tree, nodes)
    return NodeHold(job.id, nodes, amounts, name, found[2] if found else None, borrowing)


def within_guarantee(book: QuotaBook, job: JobView) -> bool:
    demand = total_demand(job)
    return any(book.within_guarantee(job.team, f, demand) for f in flavors_for(job, book))


def backfill_remedy(cycle: HoldingCycle, expected_start: float | None) -> tuple[str, ...]:
    window = None if expected_start is None else expected_start - cycle.snapshot.now
    if window is None or window < 1:
        return ()
    return (f"give it a time limit of at most {format_duration(window)} to backfill",)
