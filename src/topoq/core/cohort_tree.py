"""The cohort tree of a policy, and how borrowing flows through it for one flavor.

Teams are the leaves; a team's cohort path names the cohorts above it (``[org, x]`` is cohort
``x`` under ``org``); teams without a cohort share one unnamed top-level cohort (path ``()``).
Above the top-level cohorts is the cluster, whose only quota is the *idle* capacity no team or
cohort is guaranteed. Top-level cohorts lend nothing to each other; they share idle capacity.

Per flavor and covered resource, bottom-up (:func:`flow_of`):

- a team **needs** its usage above its guarantee and **offers** what it lends (its unused
  guarantee, within its lending limit; nothing for DontLend or inactive teams);
- a cohort's pool is its own guarantee plus what its children offer; its children's needs are
  served from it first. What is left over is what the cohort **offers** its parent (within its
  lending limit); what is missing is what it **needs** from its parent — within its borrowing
  limit. Need beyond the borrowing limit is **over the limit**: no one may serve it;
- the top-level cohorts' needs are served by idle capacity; what idle capacity cannot serve is
  **unserved**.

A team's borrowing is thus served inside its own cohort first, then by the parent cohort's
pool, and so on up to the top, then by idle capacity. Netting at each cohort is optimal on a
tree, so the books balance (``shortfall`` is zero) exactly when some way to serve every team's
borrowing respects every limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    CohortSpec,
    FlavorName,
    TeamName,
)
from topoq.domain.resources import Resources

TeamFigure = Callable[[TeamName], Resources]


@dataclass(frozen=True)
class CohortTree:
    """The cohorts of one policy, built once per book (copies share it)."""

    order: tuple[CohortPath, ...]
    """Every cohort, deepest first (children before their parent)."""
    teams: Mapping[CohortPath, tuple[TeamName, ...]]
    """The teams directly in each cohort."""
    children: Mapping[CohortPath, tuple[CohortPath, ...]]
    members: Mapping[CohortPath, tuple[TeamName, ...]]
    """Every team under each cohort."""
    specs: Mapping[CohortPath, CohortSpec]
    guaranteed: Mapping[CohortPath, Mapping[FlavorName, Resources]]
    """Per cohort and flavor, the guarantee of its whole subtree (its own and every active
    team's and cohort's below it)."""

    @classmethod
    def of(cls, policy: ClusterPolicy) -> CohortTree:
        paths: set[CohortPath] = set()
        teams: dict[CohortPath, list[TeamName]] = {}
        for team in policy.teams:
            teams.setdefault(team.cohort, []).append(team.name)
            paths.update(levels(team.cohort))
        for cohort in policy.cohorts:
            paths.update(levels(cohort.path))
        children: dict[CohortPath, list[CohortPath]] = {}
        for path in paths:
            if len(path) > 1:
                children.setdefault(path[:-1], []).append(path)
        members: dict[CohortPath, list[TeamName]] = {}
        guaranteed: dict[CohortPath, dict[FlavorName, Resources]] = {}
        for team in policy.teams:
            for level in levels(team.cohort):
                members.setdefault(level, []).append(team.name)
            for quota in team.quotas if team.active else ():
                for level in levels(team.cohort):
                    _add(guaranteed, level, quota.flavor, quota.guarantee)
        for cohort in policy.cohorts:
            for cohort_quota in cohort.quotas:
                for level in levels(cohort.path):
                    _add(guaranteed, level, cohort_quota.flavor, cohort_quota.guarantee)
        return cls(
            order=tuple(sorted(paths, key=lambda path: (-len(path), path))),
            teams={path: tuple(names) for path, names in teams.items()},
            children={path: tuple(sorted(kids)) for path, kids in children.items()},
            members={path: tuple(names) for path, names in members.items()},
            specs=dict(policy.by_cohort),
            guaranteed=guaranteed,
        )

    def quota(self, path: CohortPath, flavor: FlavorName) -> CohortQuota | None:
        spec = self.specs.get(path)
        return spec.quota_for(flavor) if spec is not None else None

    def weight(self, path: CohortPath) -> int:
        spec = self.specs.get(path)
        return spec.fair_share_weight if spec is not None else 1


def levels(path: CohortPath) -> list[CohortPath]:
    """The cohorts a path goes through, from the top down (``()`` for teams without one)."""
    return [path[:depth] for depth in range(1, len(path) + 1)] or [()]


def closest_common(left: CohortPath, right: CohortPath) -> int:
    """How many cohorts two paths share from the top (0: they meet only at the cluster). Teams
    without a cohort share the unnamed one."""
    if not left and not right:
        return 1
    shared = 0
    for mine, theirs in zip(left, right, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


def _add(
    totals: dict[CohortPath, dict[FlavorName, Resources]],
    path: CohortPath,
    flavor: FlavorName,
    amount: Resources,
) -> None:
    flavors = totals.setdefault(path, {})
    flavors[flavor] = flavors.get(flavor, Resources()) + amount


@dataclass(frozen=True)
class Flow:
    """How one flavor's borrowing is served (see the module documentation)."""

    team_need: Mapping[TeamName, Resources]
    need: Mapping[CohortPath, Resources]
    offer: Mapping[CohortPath, Resources]
    over_limit: Mapping[CohortPath, Resources]
    unserved: Resources
    team_offer: Mapping[TeamName, Resources]
    supply: Mapping[CohortPath, Resources]
    """Per cohort, its own guarantee plus what its children offer."""
    demand: Mapping[CohortPath, Resources]
    """Per cohort, what its children need."""
    top_need: Resources
    idle: Resources

    @property
    def shortfall(self) -> Resources:
        total = self.unserved
        for amount in self.over_limit.values():
            total = total + amount
        return total


def flow_of(
    tree: CohortTree,
    flavor: FlavorName,
    *,
    need_of: TeamFigure,
    offer_of: TeamFigure,
    own: Callable[[CohortPath], Resources],
    idle: Resources,
) -> Flow:
    """Settle every cohort bottom-up; ``own`` is a cohort's own (covered) guarantee."""
    team_need: dict[TeamName, Resources] = {}
    team_offer: dict[TeamName, Resources] = {}
    need: dict[CohortPath, Resources] = {}
    offer: dict[CohortPath, Resources] = {}
    over: dict[CohortPath, Resources] = {}
    supplies: dict[CohortPath, Resources] = {}
    demands: dict[CohortPath, Resources] = {}
    for path in tree.order:
        supply, demand = own(path), Resources()
        for team in tree.teams.get(path, ()):
            team_need[team], team_offer[team] = need_of(team), offer_of(team)
            supply, demand = supply + team_offer[team], demand + team_need[team]
        for child in tree.children.get(path, ()):
            supply, demand = supply + offer[child], demand + need[child]
        supplies[path], demands[path] = supply, demand
        need[path], offer[path], over[path] = _settle(tree.quota(path, flavor), supply, demand)
    top_need = Resources()
    for path in tree.order:
        if len(path) <= 1:
            top_need = top_need + need[path]
    unserved = _positive(top_need - idle)
    return Flow(
        team_need, need, offer, over, unserved, team_offer, supplies, demands, top_need, idle
    )


def _settle(
    quota: CohortQuota | None, supply: Resources, demand: Resources
) -> tuple[Resources, Resources, Resources]:
    """A cohort's need from its parent, its offer to it and its need over its borrow limit."""
    short, spare = _positive(demand - supply), _positive(supply - demand)
    if quota is None:
        return short, spare, Resources()
    over = _over(short, quota.borrow_limit, quota.borrow_limited)
    return short - over, spare - _over(spare, quota.lending_limit, quota.lend_limited), over


@dataclass(frozen=True)
class PathFlow:
    """The cohorts on one team's path, settled again after a change of that team alone."""

    need: Mapping[CohortPath, Resources]
    over_limit: Mapping[CohortPath, Resources]
    unserved: Resources


@dataclass(frozen=True)
class _Resettled:
    """One cohort on a team's path, settled again after that team's figures moved."""

    level: CohortPath
    supply: Resources
    demand: Resources
    need: Resources
    offer: Resources
    over: Resources


def _resettle_path(
    tree: CohortTree,
    flow: Flow,
    flavor: FlavorName,
    team: TeamName,
    path: CohortPath,
    need: Resources,
    offer: Resources,
) -> tuple[list[_Resettled], Resources]:
    """The cohorts on the team's path settled again, deepest first, once it needs ``need`` and
    offers ``offer`` (the rest of the tree does not move), and how much more the top cohort
    then needs."""
    more_need, more_offer = need - flow.team_need[team], offer - flow.team_offer[team]
    settled = []
    for level in reversed(levels(path)):
        supply = flow.supply[level] + more_offer
        demand = flow.demand[level] + more_need
        needed, offered, over = _settle(tree.quota(level, flavor), supply, demand)
        settled.append(_Resettled(level, supply, demand, needed, offered, over))
        more_need, more_offer = needed - flow.need[level], offered - flow.offer[level]
    return settled, more_need


def flow_after(
    tree: CohortTree,
    flow: Flow,
    flavor: FlavorName,
    team: TeamName,
    path: CohortPath,
    *,
    need: Resources,
    offer: Resources,
) -> PathFlow:
    """``flow`` once ``team`` (at ``path``) needs ``need`` and offers ``offer``: only the cohorts
    on its path change, so only they are settled again (deepest first)."""
    settled, more_need = _resettle_path(tree, flow, flavor, team, path, need, offer)
    return PathFlow(
        {cohort.level: cohort.need for cohort in settled},
        {cohort.level: cohort.over for cohort in settled},
        _positive(flow.top_need + more_need - flow.idle),
    )


def flow_updated(
    tree: CohortTree,
    flow: Flow,
    flavor: FlavorName,
    team: TeamName,
    path: CohortPath,
    *,
    need: Resources,
    offer: Resources,
) -> Flow:
    """``flow`` once ``team`` (at ``path``) needs ``need`` and offers ``offer``, as a whole
    ``Flow``: the cohorts on its path are settled again (:func:`flow_after`'s work) and every
    other figure is kept — the same flow as settling every cohort anew (sums of whole amounts
    are exact), at the cost of one path instead of the whole tree. The books keep their flow
    this way across the charges of a cycle."""
    settled, more_need = _resettle_path(tree, flow, flavor, team, path, need, offer)
    team_need, team_offer = dict(flow.team_need), dict(flow.team_offer)
    team_need[team], team_offer[team] = need, offer
    needs, offers, over = dict(flow.need), dict(flow.offer), dict(flow.over_limit)
    supplies, demands = dict(flow.supply), dict(flow.demand)
    for cohort in settled:
        supplies[cohort.level], demands[cohort.level] = cohort.supply, cohort.demand
        needs[cohort.level], offers[cohort.level], over[cohort.level] = (
            cohort.need,
            cohort.offer,
            cohort.over,
        )
    top_need = flow.top_need + more_need
    unserved = _positive(top_need - flow.idle)
    return Flow(
        team_need, needs, offers, over, unserved, team_offer, supplies, demands, top_need, flow.idle
    )


def drawn_from(
    tree: CohortTree, flow: Flow, own: Callable[[CohortPath], Resources]
) -> dict[TeamName, Resources]:
    """Per team, the part of what it offers that borrowers use now: each cohort serves its
    children's needs (and what its parent draws from it) from its own guarantee first, then
    from its children's offers in proportion to each."""
    drawn: dict[CohortPath, Resources] = {}
    team_drawn: dict[TeamName, Resources] = {}
    for path in reversed(tree.order):  # top-down
        kids = tree.children.get(path, ())
        teams = tree.teams.get(path, ())
        demand = drawn.get(path, Resources())
        for team in teams:
            demand = demand + flow.team_need[team]
        for child in kids:
            demand = demand + flow.need[child]
        from_children = _positive(demand - own(path))
        offers = [(child, flow.offer[child]) for child in kids]
        team_offers = [(team, flow.team_offer[team]) for team in teams]
        total = Resources()
        for _, amount in (*offers, *team_offers):
            total = total + amount
        for child, amount in offers:
            drawn[child] = _share(amount, from_children, total)
        for team, amount in team_offers:
            team_drawn[team] = _share(amount, from_children, total)
    return team_drawn


def _share(amount: Resources, wanted: Resources, total: Resources) -> Resources:
    return Resources(
        {
            name: min(value, value * wanted.amount(name) // total.amount(name))
            for name, value in amount.items()
            if total.amount(name)
        }
    )


def _positive(resources: Resources) -> Resources:
    return Resources({name: value for name, value in resources.items() if value > 0})


def _over(amount: Resources, limit: Resources, limited: frozenset[str]) -> Resources:
    """The part of ``amount`` above ``limit`` on the resources the limit names."""
    return Resources(
        {
            name: amount.amount(name) - limit.amount(name)
            for name in limited
            if amount.amount(name) > limit.amount(name)
        }
    )
