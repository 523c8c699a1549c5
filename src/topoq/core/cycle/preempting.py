"""Making room by eviction when a job does not fit: the rules in the order they are tried
(in-team priority, reclaim of lent capacity, fair share), each with the candidates it allows,
and topology-aware victim selection (``core.preemption``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from enum import Enum

from topoq.core.admission import Attempt
from topoq.core.cycle.snapshot import PlacementMode
from topoq.core.cycle.state import CycleState
from topoq.core.fair_share import fair_share_position
from topoq.core.holdings import total_demand
from topoq.core.ordering import priority_of
from topoq.core.preemption import MayEvict, VictimSearch, select_victims
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.core.starvation import waiting_since
from topoq.domain.decisions import Diagnostic, PendingReason, Preempt, PreemptionCause
from topoq.domain.governance import FlavorName, IdleAllocation, PreemptTeamTasks, TeamName
from topoq.domain.job import JobId, JobView

TRIAL_PLACEMENTS_PER_CYCLE = 256
"""The trial placements all victim searches of one cycle may make together. With a team's
later jobs held back behind its waiting head, a cycle searches for about one job per team,
far below this; it caps the cost of a cycle in which many searches would each try many
domains. Jobs whose search it cuts short wait, and search again next cycle."""


class Search(Enum):
    PREEMPTED = "preempted"
    NONE_FOUND = "none found"
    DEFERRED = "deferred"
    """The cycle's trial budget was spent before the search could finish."""


def preempt_for(cycle: CycleState, job: JobView, attempts: list[Attempt]) -> Search:
    """Make room for the job by evicting others as the rules allow (victims named, the job
    waits for them to stop)."""
    budget, placement = cycle.trial_budget, cycle.snapshot.placement
    for attempt in attempts:
        if attempt.quota.verdict is QuotaVerdict.UNKNOWN_TEAM:
            continue
        search = VictimSearch(
            job,
            attempt.flavor,
            attempt.workload,
            topology_aware=placement is PlacementMode.TOPOQ,
            first_fit=placement is PlacementMode.FIRST_FIT,
        )
        book = cycle.book_for(job)  # the quota held from it stays held: evict only to fit
        for cause, candidates, may_evict in _preemption_rules(cycle, job, attempt):
            victims = select_victims(cycle.ledger, book, search, candidates, may_evict, budget)
            if budget.spent:
                return Search.DEFERRED
            if victims:
                _issue_preemptions(cycle, job, victims, cause, attempt.flavor)
                return Search.PREEMPTED
    return Search.NONE_FOUND


def with_search_deferred(diagnostic: Diagnostic) -> Diagnostic:
    """A wait whose preemption search the cycle's budget cut short says so."""
    return replace(
        diagnostic,
        message=f"{diagnostic.message}; no preemption was searched for it this cycle (the "
        "cycle's search budget was spent): the next cycle searches again",
        numbers=dict(diagnostic.numbers) | {"preemption_search": "deferred"},
    )


PreemptionRule = tuple[PreemptionCause, list[JobView], MayEvict]


def _preemption_rules(
    cycle: CycleState, job: JobView, attempt: Attempt
) -> Iterator[PreemptionRule]:
    """The candidates each rule allows, in the order the rules are tried."""
    flavor = attempt.flavor
    policy = cycle.policy
    team = policy.by_team.get(job.team)
    mine = priority_of(policy, job)
    running = cycle.running_on(flavor)
    if team is not None and team.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY:
        lower = cycle.lower_priority_running(job.team, flavor, mine)
        yield PreemptionCause.PREEMPTED_FOR_PRIORITY, lower, _always
    if job.team in cycle.losing_teams:
        return  # a team that just lost work to others takes none back in the same cycle
    if cycle.gaining_teams:  # a team only gains as the books change: shared until then
        gaining = cycle.gaining_teams
        running = cycle.shared(
            ("running on, of teams not gaining", flavor, len(gaining)),
            lambda: [h for h in running if h.team not in gaining],
            booked=True,
        )
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
        borrowing = {  # asked once per team, not per running job
            team: bool(cycle.book.borrowed(team, flavor))
            for team in {h.team for h in running if h.team != job.team}
        }
        guard_s = policy.starvation_guard_s
        richer = [
            h
            for h in running
            if borrowing.get(h.team, False)
            and _share_left(cycle, h) >= mine_after
            and not started_starving(h, guard_s)
        ]
        share = {
            team: fair_share_position(cycle.book, team, usage) for team in {h.team for h in richer}
        }
        richest_first = sorted(richer, key=lambda h: -share[h.team])  # in eviction order
        yield (
            PreemptionCause.PREEMPTED_FOR_FAIR_SHARE,
            richest_first,
            lambda victim, book: (
                bool(book.borrowed(victim.team, flavor))
                and _share_without(book, victim, usage) >= mine_after
            ),
        )


def started_starving(job: JobView, guard_s: float) -> bool:
    """Whether the job was admitted after waiting past the starvation guard (``guard_s``; 0:
    off) since it last entered the queue. Fair-share preemption spares such a job: the guard
    got it its capacity, and evicting it for fair share would starve it again — and the
    guard would take the capacity back for it, over and over. Priority and reclaim still
    apply to it."""
    if guard_s <= 0 or job.admitted_at is None:
        return False
    return job.admitted_at - waiting_since(job) >= guard_s


def _reclaim_candidates(
    book: QuotaBook, job: JobView, running: list[JobView], flavor: FlavorName
) -> list[JobView]:
    """Work on capacity lent from the claimant's side of the cohort tree, the closest cohort
    first (work of its own cohort's borrowers before that of cousins), each in eviction order
    (``running`` comes in it)."""
    demand = total_demand(job)
    closest_first = {  # asked once per team, not per running job
        team: -book.closeness(job.team, team)
        for team in {h.team for h in running}
        if team != job.team and book.reclaimable(job.team, team, flavor, demand)
    }
    borrowers = [h for h in running if h.team in closest_first]
    return sorted(borrowers, key=lambda h: closest_first[h.team])


def _share_left(cycle: CycleState, victim: JobView) -> float:
    """``_share_without`` on the cycle's books, shared by the victims of a team that use alike
    until the books change."""
    usage = victim.allocation.usage if victim.allocation is not None else {}
    return cycle.shared(
        ("share-without", victim.team, *usage.items()),  # an allocation's flavors, in order
        lambda: _share_without(cycle.book, victim, cycle.snapshot.fair_share_usage),
        booked=True,
    )


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


def _fits_guarantee(cycle: CycleState, job: JobView, flavor: FlavorName) -> bool:
    """Within its team's guarantee, or within that of a cohort on its path with its own."""
    book, demand = cycle.book, total_demand(job)
    own = book.own_guarantee_after(job.team, flavor, demand)  # shares of a GPU counted in
    if own is None:
        return False
    return own or book.within_cohort_guarantee(job.team, flavor, demand)


def _issue_preemptions(
    cycle: CycleState,
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
                cycle.release_quota(victim.team, victim_flavor, amount)
    cycle.charge_quota(job.team, flavor, total_demand(job))
    if cause is not PreemptionCause.PREEMPTED_FOR_PRIORITY:
        cycle.gaining_teams.add(job.team)
        cycle.losing_teams.update(victim.team for victim in victims)
    for victim in victims:
        cycle.evict(victim)
        cycle.preemptions.append(
            Preempt(
                victim.id,
                job.id,
                cause,
                f"{cause.value}: evicted so that {job.id} (team {job.team}) fits",
            )
        )
    cycle.decide_wait(
        waiting_for_victims(job, [victim.id for victim in victims], {"cause": cause.value})
    )


def waiting_for_victims(
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
