"""The cohort tree of a policy, and how borrowing flows through it for one flavor.

Teams are the leaves; a team's cohort path names the cohorts above it (``[org, x]`` is cohort
``x`` under ``org``); teams without a cohort share one unnamed top-level cohort (path ``()``).
Above the top-level cohorts is the cluster, whose only quota is the *idle* capacity no team or
cohort is guaranteed. Top-level cohorts lend nothing to each other; they share idle capacity.

Per flavor and covered resource, bottom-up (settled by :mod:`topoq.core.quota_flow`):

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

from collections.abc import Mapping
from dataclasses import dataclass, replace

from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    CohortSpec,
    FlavorName,
    TeamName,
)
from topoq.domain.resources import Resources


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

    def with_guarantee_moved(
        self, path: CohortPath, flavor: FlavorName, delta: Resources
    ) -> CohortTree:
        """The same tree once an active team at ``path`` is guaranteed ``delta`` more of
        ``flavor`` (a policy with one team's quota changed): only the subtree guarantees on
        its path move."""
        guaranteed = dict(self.guaranteed)
        for level in levels(path):
            flavors = dict(guaranteed.get(level, {}))
            flavors[flavor] = flavors.get(flavor, Resources()) + delta
            guaranteed[level] = flavors
        return replace(self, guaranteed=guaranteed)


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


@dataclass(frozen=True)
class PathFlow:
    """The cohorts on one team's path, settled again after a change of that team alone."""

    need: Mapping[CohortPath, Resources]
    over_limit: Mapping[CohortPath, Resources]
    unserved: Resources
