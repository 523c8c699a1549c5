"""Fair share with usage history: each team's decayed usage of borrowed capacity, and its
fair-share position, which combines that usage with what it borrows now.

- A team **accrues** usage while it holds capacity above its guarantee: its *borrowed
  fraction* — the largest fraction of any covered resource of any flavor that it holds above
  its guarantee (the quantity ``dominant_share`` weighs). Work inside a guarantee accrues
  nothing: fair share arbitrates only what teams borrow, and a team that used its own quota
  all morning has taken nothing from anyone.
- Usage **decays** with the policy's half-life ``h``: over ``Δt`` it is multiplied by
  ``2^(-Δt/h)``. What is kept is the decayed average of the borrowed fraction,
  ``(ln 2 / h) · ∫ fraction(τ) · 2^(-(now-τ)/h) dτ`` — decayed fraction-seconds divided by the
  mean age ``h / ln 2`` — so it reads as a share of the cluster (a team that borrowed 40 % for
  much longer than ``h`` has usage 0.4) and its step-by-step update is exact: a fraction ``a``
  held for ``Δt`` moves usage ``u`` to ``u·f + a·(1-f)`` with ``f = 2^(-Δt/h)``, the same
  whether the time is accounted in one step or in many.
- A team's **fair-share position** is ``(borrowed fraction now + usage) / weight``: lower
  goes first, and fair-share preemption evicts from the highest. With usage 0 (no history, or
  half-life 0, which turns history off) it is the instantaneous weighted share, as before.

Pure: the shell keeps the usage (the store's ``team_usage`` table, the simulator's memory)
and brings it forward with :func:`usage_at`; the cycle sees it as of ``snapshot.now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.quota import QuotaBook, dominant_share
from topoq.core.quota import borrowed_fraction as quota_borrowed_fraction
from topoq.core.tree import TopologyTree
from topoq.domain.governance import ClusterPolicy, IdleAllocation, TeamName
from topoq.domain.job import JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL

RECHECK_FRACTION = 1 / 1000
"""While the queue waits on unchanged inputs, the cycle is run again once this fraction of the
half-life has passed (86 s with the default day): usage moves by at most ``ln 2`` times this
fraction of the cluster in between (0.07 %; a position by that over the team's weight), so a
decision that time alone changes comes at most that late, and a waiting queue costs a cycle
per recheck, not one per step."""


@dataclass(frozen=True)
class TeamUsage:
    """A team's decayed usage: the decayed average of its borrowed fraction, as of a time."""

    share: float
    as_of_s: float


def history_on(policy: ClusterPolicy) -> bool:
    """Whether usage history enters fair share: fair-share idle allocation, half-life > 0."""
    return (
        policy.idle_allocation is IdleAllocation.FAIR_SHARE
        and policy.fair_share_usage_half_life_s > 0
    )


def kept_half_life_s(policy: ClusterPolicy) -> float:
    """The half-life usage is kept with: the policy's under fair share, else 0 (first-come
    keeps no usage, so switching to it clears the history)."""
    return policy.fair_share_usage_half_life_s if history_on(policy) else 0.0


def borrowed_fraction(book: QuotaBook, team: TeamName) -> float:
    """The largest fraction of any covered resource of any flavor the team holds above its
    guarantee (unweighted; 0 when it borrows nothing; a share of a GPU counts as its part of
    one GPU): ``core.quota.borrowed_fraction``."""
    return quota_borrowed_fraction(book, team)


def borrowed_fractions(book: QuotaBook) -> dict[TeamName, float]:
    """Every team's borrowed fraction, for the teams that borrow."""
    fractions = {team: borrowed_fraction(book, team) for team in book.usage}
    return {team: fraction for team, fraction in fractions.items() if fraction > 0}


def held_fractions(
    policy: ClusterPolicy,
    tree: TopologyTree,
    jobs: Iterable[JobView],
    flavor_label: str = INSTANCE_TYPE_LABEL,
) -> dict[TeamName, float]:
    """The borrowed fraction of every team that borrows, from the jobs that hold capacity:
    what each team accrues usage at until the holdings change."""
    holders = [job for job in jobs if job.phase.holds_capacity]
    book = QuotaBook(policy, capacity_by_flavor(tree, flavor_label), usage_by_team(holders))
    return borrowed_fractions(book)


def decayed(share: float, held: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage ``share`` after ``elapsed_s`` in which the team held the fraction ``held``."""
    if elapsed_s <= 0:
        return share
    factor = math.exp(-math.log(2.0) * elapsed_s / half_life_s)
    return share * factor + held * (1.0 - factor)


def usage_at(
    usage: Mapping[TeamName, TeamUsage],
    held: Mapping[TeamName, float],
    *,
    since_s: float,
    now_s: float,
    half_life_s: float,
) -> dict[TeamName, TeamUsage]:
    """Every team's usage brought forward to ``now_s``: each decays from its own ``as_of_s``
    while it held ``held[team]`` (a team with no usage yet starts at 0 at ``since_s``). With
    half-life 0 nothing is kept. A time before ``as_of_s`` (a clock set back) leaves it."""
    if half_life_s <= 0:
        return {}
    teams = set(usage) | set(held)
    brought: dict[TeamName, TeamUsage] = {}
    for team in sorted(teams):
        before = usage.get(team, TeamUsage(0.0, since_s))
        elapsed = now_s - before.as_of_s
        share = decayed(before.share, held.get(team, 0.0), elapsed, half_life_s)
        brought[team] = TeamUsage(share, max(now_s, before.as_of_s))
    return brought


def estimated_usage(
    policy: ClusterPolicy,
    tree: TopologyTree,
    holders: Iterable[JobView],
    stored: Mapping[TeamName, TeamUsage],
    now_s: float,
) -> dict[TeamName, float]:
    """For readers of the store (the API): each team's usage brought from what was stored to
    ``now_s`` as if it held what ``holders`` hold since (the controller saves at least once a
    minute, so the estimate is at most that old). Empty when the policy keeps no usage."""
    half_life_s = kept_half_life_s(policy)
    if half_life_s <= 0:
        return {}
    held = held_fractions(policy, tree, holders)
    brought = usage_at(stored, held, since_s=now_s, now_s=now_s, half_life_s=half_life_s)
    return shares_of(brought)


def shares_of(usage: Mapping[TeamName, TeamUsage]) -> dict[TeamName, float]:
    """The decayed shares alone, as a snapshot carries them."""
    return {team: entry.share for team, entry in usage.items()}


def fair_share_position(book: QuotaBook, team: TeamName, usage: Mapping[TeamName, float]) -> float:
    """``(borrowed fraction now + decayed usage) / weight``: ``dominant_share`` (the weighted
    share now) plus the team's usage over its weight (none when the policy's half-life is 0,
    whatever ``usage`` says). A weight of 0 sorts last once the team borrows or has usage; a
    team with neither stands at 0."""
    now = dominant_share(book, team)
    history = usage.get(team, 0.0) if book.policy.fair_share_usage_half_life_s > 0 else 0.0
    if history <= 0:
        return now
    spec = book.policy.by_team.get(team)
    weight = spec.fair_share_weight if spec is not None else 0
    return now + (history / weight if weight > 0 else float("inf"))


def recheck_due(policy: ClusterPolicy, settled_at_s: float, now_s: float) -> bool:
    """Whether enough time passed since a settled cycle for usage alone to matter
    (:data:`RECHECK_FRACTION` of the half-life); never when history is off."""
    half_life_s = kept_half_life_s(policy)
    return half_life_s > 0 and now_s - settled_at_s >= half_life_s * RECHECK_FRACTION


@dataclass(frozen=True)
class TeamStanding:
    """One team's fair-share figures, for explanations."""

    team: TeamName
    weight: int
    borrowed_now: float
    """Its borrowed fraction now (unweighted)."""
    usage: float
    """Its decayed usage (unweighted)."""
    position: float
    """``(borrowed_now + usage) / weight``; infinite for weight 0 with either above 0."""


def standings(
    policy: ClusterPolicy,
    tree: TopologyTree,
    holders: Iterable[JobView],
    usage: Mapping[TeamName, float],
    *,
    also: Iterable[TeamName] = (),
) -> list[TeamStanding]:
    """The standing of every team of the policy that borrows now or has usage (and of the
    teams in ``also``), lowest position — the next to be served — first."""
    holding = [job for job in holders if job.phase.holds_capacity]
    book = QuotaBook(policy, capacity_by_flavor(tree, INSTANCE_TYPE_LABEL), usage_by_team(holding))
    wanted = set(also)
    rows = []
    for spec in policy.teams:
        borrowed = borrowed_fraction(book, spec.name)
        history = usage.get(spec.name, 0.0)
        if borrowed > 0 or history > 0 or spec.name in wanted:
            position = fair_share_position(book, spec.name, usage)
            rows.append(
                TeamStanding(spec.name, spec.fair_share_weight, borrowed, history, position)
            )
    return sorted(rows, key=lambda row: (row.position, row.team))
