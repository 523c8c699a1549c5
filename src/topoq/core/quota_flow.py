"""How one flavor's borrowing is served through the cohort tree, on ``Amounts``.

The rules are :mod:`topoq.core.cohort_tree`'s (a team's need is served inside its own cohort
first, then by each cohort above it, within each cohort's limits, then by idle capacity);
this module settles them on fixed-order tuples (:mod:`topoq.core.quota_terms`), which the
books keep across a cycle's charges: :func:`settled` settles every cohort bottom-up,
:func:`path_after` only the cohorts on one team's path once its figures move (what a quota
check asks), and :func:`with_team` keeps a settlement in step with a charge that way. A
``Settlement`` reads as a ``cohort_tree.Flow`` of ``Resources`` through ``as_flow``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from topoq.core.cohort_tree import CohortTree, Flow, PathFlow, levels
from topoq.core.quota_terms import (
    Amounts,
    CohortLimits,
    FlavorTerms,
    above_zero,
    minus,
    plus,
    total,
)
from topoq.domain.governance import CohortPath, TeamName
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU
from topoq.domain.resources import Resources


class Settlement(NamedTuple):
    """``cohort_tree.Flow``'s figures as ``Amounts`` (a named tuple, like the other records
    here: the books make one per charge and check, and a tuple is made faster than a frozen
    dataclass)."""

    team_need: Mapping[TeamName, Amounts]
    team_offer: Mapping[TeamName, Amounts]
    need: Mapping[CohortPath, Amounts]
    offer: Mapping[CohortPath, Amounts]
    over_limit: Mapping[CohortPath, Amounts]
    supply: Mapping[CohortPath, Amounts]
    demand: Mapping[CohortPath, Amounts]
    top_need: Amounts
    idle: Amounts
    unserved: Amounts

    def shortfall(self) -> Amounts:
        return total(self.over_limit.values(), self.unserved)

    def as_flow(self, terms: FlavorTerms) -> Flow:
        def read(figures: Mapping[CohortPath, Amounts]) -> dict[CohortPath, Resources]:
            return {path: terms.resources(amounts) for path, amounts in figures.items()}

        return Flow(
            {team: terms.resources(amounts) for team, amounts in self.team_need.items()},
            read(self.need),
            read(self.offer),
            read(self.over_limit),
            terms.resources(self.unserved),
            {team: terms.resources(amounts) for team, amounts in self.team_offer.items()},
            read(self.supply),
            read(self.demand),
            terms.resources(self.top_need),
            terms.resources(self.idle),
        )


class PathSettlement(NamedTuple):
    """The cohorts on one team's path, settled again after a change of that team alone."""

    need: Mapping[CohortPath, Amounts]
    over_limit: Mapping[CohortPath, Amounts]
    unserved: Amounts

    def as_path_flow(self, terms: FlavorTerms) -> PathFlow:
        return PathFlow(
            {path: terms.resources(amounts) for path, amounts in self.need.items()},
            {path: terms.resources(amounts) for path, amounts in self.over_limit.items()},
            terms.resources(self.unserved),
        )


def settled(
    tree: CohortTree,
    terms: FlavorTerms,
    team_need: Mapping[TeamName, Amounts],
    team_offer: Mapping[TeamName, Amounts],
    idle: Amounts,
) -> Settlement:
    """Every cohort settled bottom-up, from each team's need and offer."""
    need: dict[CohortPath, Amounts] = {}
    offer: dict[CohortPath, Amounts] = {}
    over: dict[CohortPath, Amounts] = {}
    supplies: dict[CohortPath, Amounts] = {}
    demands: dict[CohortPath, Amounts] = {}
    for path in tree.order:
        supply, demand = terms.own[path], terms.zero
        for team in tree.teams.get(path, ()):
            supply, demand = plus(supply, team_offer[team]), plus(demand, team_need[team])
        for child in tree.children.get(path, ()):
            supply, demand = plus(supply, offer[child]), plus(demand, need[child])
        supplies[path], demands[path] = supply, demand
        need[path], offer[path], over[path] = _settled(terms.limits[path], supply, demand)
    top_need = total((need[path] for path in tree.order if len(path) <= 1), terms.zero)
    unserved = above_zero(minus(top_need, idle))
    return Settlement(
        team_need, team_offer, need, offer, over, supplies, demands, top_need, idle, unserved
    )


def _settled(
    limits: CohortLimits | None, supply: Amounts, demand: Amounts
) -> tuple[Amounts, Amounts, Amounts]:
    """A cohort's need from its parent, its offer to it and its need over its borrow limit."""
    pairs = tuple(zip(demand, supply, strict=True))
    short = tuple([wanted - had if wanted > had else 0 for wanted, had in pairs])
    spare = tuple([had - wanted if had > wanted else 0 for wanted, had in pairs])
    if limits is None:
        return short, spare, minus(short, short)
    over = _over(short, limits.borrow_limit, limits.borrow_limited)
    lent = minus(spare, _over(spare, limits.lending_limit, limits.lend_limited))
    return minus(short, over), lent, over


def _over(amounts: Amounts, limit: Amounts, limited: tuple[bool, ...]) -> Amounts:
    """The part of ``amounts`` above ``limit`` on the resources the limit speaks about."""
    return tuple(
        value - most if speaks and value > most else 0
        for value, most, speaks in zip(amounts, limit, limited, strict=True)
    )


class _Moved(NamedTuple):
    """A cohort on a team's path settled again: its figures once the team's moved."""

    level: CohortPath
    supply: Amounts
    demand: Amounts
    need: Amounts
    offer: Amounts
    over: Amounts


def _moved(
    terms: FlavorTerms,
    settlement: Settlement,
    team: TeamName,
    path: CohortPath,
    need: Amounts,
    offer: Amounts,
) -> tuple[list[_Moved], Amounts]:
    """The cohorts on ``team``'s path (at ``path``) settled again, deepest first, once it
    needs ``need`` and offers ``offer``, and the top-level cohorts' need then. Only the
    cohorts on its path can change, and settling stops at the first whose need from its
    parent and offer to it do not move: every cohort above it is then settled from the same
    figures as before, so it keeps them (sums of whole amounts are exact)."""
    more_need = minus(need, settlement.team_need[team])
    more_offer = minus(offer, settlement.team_offer[team])
    moved: list[_Moved] = []
    for level in reversed(levels(path)):
        if not any(more_need) and not any(more_offer):
            break
        supply = plus(settlement.supply[level], more_offer)
        demand = plus(settlement.demand[level], more_need)
        needed, offered, over = _settled(terms.limits[level], supply, demand)
        moved.append(_Moved(level, supply, demand, needed, offered, over))
        more_need = minus(needed, settlement.need[level])
        more_offer = minus(offered, settlement.offer[level])
    return moved, plus(settlement.top_need, more_need)


def path_after(
    terms: FlavorTerms,
    settlement: Settlement,
    team: TeamName,
    path: CohortPath,
    *,
    need: Amounts,
    offer: Amounts,
) -> PathSettlement:
    """``settlement`` once ``team`` (at ``path``) needs ``need`` and offers ``offer``: the
    cohorts on its path, only as many settled again as :func:`_moved` needs."""
    moved, top_need = _moved(terms, settlement, team, path, need, offer)
    needs = {level: settlement.need[level] for level in levels(path)}
    over = {level: settlement.over_limit[level] for level in levels(path)}
    for cohort in moved:
        needs[cohort.level], over[cohort.level] = cohort.need, cohort.over
    return PathSettlement(needs, over, above_zero(minus(top_need, settlement.idle)))


def with_team(
    terms: FlavorTerms,
    settlement: Settlement,
    team: TeamName,
    path: CohortPath,
    need: Amounts,
    offer: Amounts,
) -> Settlement:
    """The whole of ``settlement`` once ``team`` (at ``path``) needs ``need`` and offers
    ``offer``: how the books keep their settlement in step with each charge — the cohorts
    :func:`_moved` settles again, every other figure kept, the same as settling every cohort
    anew at the cost of part of one path. ``settlement`` itself when nothing moves (a charge
    of resources no quota speaks about)."""
    moved, top_need = _moved(terms, settlement, team, path, need, offer)
    if not moved:
        return settlement
    needs, offered, over = (
        dict(settlement.need),
        dict(settlement.offer),
        dict(settlement.over_limit),
    )
    supplies, demands = dict(settlement.supply), dict(settlement.demand)
    for cohort in moved:
        supplies[cohort.level], demands[cohort.level] = cohort.supply, cohort.demand
        needs[cohort.level], offered[cohort.level] = cohort.need, cohort.offer
        over[cohort.level] = cohort.over
    return Settlement(
        {**settlement.team_need, team: need},
        {**settlement.team_offer, team: offer},
        needs,
        offered,
        over,
        supplies,
        demands,
        top_need,
        settlement.idle,
        above_zero(minus(top_need, settlement.idle)),
    )


def drawn(tree: CohortTree, terms: FlavorTerms, settlement: Settlement) -> dict[TeamName, Amounts]:
    """Per team, the part of what it offers that borrowers use now: each cohort serves its
    children's needs (and what its parent draws from it) from its own guarantee first, then
    from its children's offers in proportion to each."""
    drawn_from: dict[CohortPath, Amounts] = {}
    team_drawn: dict[TeamName, Amounts] = {}
    for path in reversed(tree.order):  # top-down
        kids, teams = tree.children.get(path, ()), tree.teams.get(path, ())
        demand = drawn_from.get(path, terms.zero)
        for team in teams:
            demand = plus(demand, settlement.team_need[team])
        for child in kids:
            demand = plus(demand, settlement.need[child])
        from_children = above_zero(minus(demand, terms.own[path]))
        offers = [settlement.offer[child] for child in kids]
        team_offers = [settlement.team_offer[team] for team in teams]
        whole = total((*offers, *team_offers), terms.zero)
        for child, amounts in zip(kids, offers, strict=True):
            drawn_from[child] = _share(amounts, from_children, whole, terms.gpu)
        for team, amounts in zip(teams, team_offers, strict=True):
            team_drawn[team] = _share(amounts, from_children, whole, terms.gpu)
    return team_drawn


def _share(amounts: Amounts, wanted: Amounts, whole: Amounts, gpu: int | None) -> Amounts:
    """Each offer's part of what is drawn, rounded down: GPUs (column ``gpu``, kept in
    thousandths) to whole GPUs when every figure is whole GPUs, as they were counted before
    shares of a GPU, else to the thousandth."""
    shares = [
        min(value, value * want // out_of) if out_of else 0
        for value, want, out_of in zip(amounts, wanted, whole, strict=True)
    ]
    if gpu is not None and not any(
        figure[gpu] % GPU_MILLI_PER_GPU for figure in (amounts, wanted, whole)
    ):
        shares[gpu] -= shares[gpu] % GPU_MILLI_PER_GPU
    return tuple(shares)
