"""The governance policy: flavors, teams with quotas and sharing rules, priority classes, and the
cluster-wide choices of how work is ordered and idle capacity shared.

Same meaning as SageMaker HyperPod task governance (Kueue underneath): a team's guarantee per
flavor, a sharing strategy, a borrow limit, a fair-share weight and whether its own
higher-priority work may preempt its lower-priority work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NewType

from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import is_derived_gpu_resource
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources

TeamName = NewType("TeamName", str)
FlavorName = NewType("FlavorName", str)

DEFAULT_BORROW_LIMIT_PERCENT = 50
MAX_PRIORITY_CLASSES = 10
MAX_TEAMS = 1000
"""Teams in one policy (each is a queue the cycle visits and a row of every report)."""
MAX_WEIGHT = 100
MAX_COHORTS = 1000
"""Declared cohorts in one policy."""
DEFAULT_STARVATION_GUARD_S = 600.0
"""How long a job may wait before the capacity it needs is held for it (0: never held)."""
DEFAULT_USAGE_HALF_LIFE_S = 86400.0
"""How fast a team's fair-share usage history fades: halved in a day (0 turns history off)."""
MAX_USAGE_HALF_LIFE_S = 365 * 86400.0


class SharingStrategy(StrEnum):
    DONT_LEND = "DontLend"
    """Unused guarantee is never lent, and the team never borrows."""
    LEND = "Lend"
    """Unused guarantee is lent to others; the team never borrows."""
    LEND_AND_BORROW = "LendAndBorrow"
    """Lends unused guarantee and borrows up to its borrow limit."""

    @property
    def lends(self) -> bool:
        return self is not SharingStrategy.DONT_LEND

    @property
    def borrows(self) -> bool:
        return self is SharingStrategy.LEND_AND_BORROW


class PreemptTeamTasks(StrEnum):
    LOWER_PRIORITY = "LowerPriority"
    NEVER = "Never"


class Prioritization(StrEnum):
    FIFO = "fifo"
    PRIORITY = "priority"


class QueueOrder(StrEnum):
    """The order of the jobs of one priority (of one class, or all under fifo)."""

    SUBMISSION = "submission"
    """First submitted, first considered."""
    SHORTEST_FIRST = "shortest-first"
    """The shortest time limit first (shortest-job-first on the limits users give), then by
    submission; jobs without a limit after every job with one."""


class IdleAllocation(StrEnum):
    FIRST_COME = "first-come"
    FAIR_SHARE = "fair-share"


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "strict-fifo"
    """The head of the team's queue blocks the jobs behind it."""
    BEST_EFFORT_FIFO = "best-effort-fifo"
    """Jobs behind a blocked head may go first when they fit."""


@dataclass(frozen=True)
class FlavorQuota:
    """A team's share of one flavor. ``borrow_limit`` and ``lending_limit`` are absolute
    amounts per resource; ``None`` for lending means all unused guarantee may be lent."""

    flavor: FlavorName
    guarantee: Resources
    borrow_limit: Resources = field(default_factory=Resources)
    lending_limit: Resources | None = None
    covers: frozenset[str] = frozenset()
    """The resources this quota speaks about, zero amounts included (``Resources`` drops
    zeros): a guarantee of 0 GPUs still limits GPUs. Names in the amounts are added."""

    def __post_init__(self) -> None:
        named = set(self.covers) | set(self.guarantee) | set(self.borrow_limit)
        if self.lending_limit is not None:
            named |= set(self.lending_limit)
        object.__setattr__(self, "covers", frozenset(named))


@dataclass(frozen=True)
class TeamSpec:
    name: TeamName
    quotas: tuple[FlavorQuota, ...] = ()
    sharing: SharingStrategy = SharingStrategy.LEND_AND_BORROW
    fair_share_weight: int = 1
    preempt_team_tasks: PreemptTeamTasks = PreemptTeamTasks.LOWER_PRIORITY
    cohort: tuple[str, ...] = ()
    """Organisation → division → … above the team, outermost first."""
    queueing: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    active: bool = True

    def __post_init__(self) -> None:
        where = f"team {self.name!r}"
        if not self.name:
            raise InvalidInputError("a team has no name", hint="give every team a name")
        if not 0 <= self.fair_share_weight <= MAX_WEIGHT:
            raise InvalidInputError(
                f"fair-share weight {self.fair_share_weight}",
                where=where,
                hint=f"use a weight from 0 to {MAX_WEIGHT}",
            )
        flavors = [quota.flavor for quota in self.quotas]
        if len(set(flavors)) != len(flavors):
            raise InvalidInputError(
                "a flavor is listed twice", where=where, hint="give one quota per flavor"
            )
        for quota in self.quotas:
            _check_quota_names(quota.covers, quota.flavor, where)

    def quota_for(self, flavor: FlavorName) -> FlavorQuota | None:
        for quota in self.quotas:
            if quota.flavor == flavor:
                return quota
        return None


CohortPath = tuple[str, ...]
"""A cohort by its path from the top, outermost first: ``("research", "language")`` is cohort
``language`` under ``research``. Teams name the path of the cohort they are in."""


@dataclass(frozen=True)
class CohortQuota:
    """A cohort's own guarantee of one flavor (shared by the teams below it, on top of theirs)
    and the limits on its whole subtree: ``borrow_limit`` caps what the subtree takes from
    outside it, ``lending_limit`` what of its unused quota it lends outside it. A limit speaks
    only about the resources in ``borrow_limited`` / ``lend_limited`` (zeros included); other
    resources are unlimited."""

    flavor: FlavorName
    guarantee: Resources = field(default_factory=Resources)
    borrow_limit: Resources = field(default_factory=Resources)
    lending_limit: Resources = field(default_factory=Resources)
    borrow_limited: frozenset[str] = frozenset()
    lend_limited: frozenset[str] = frozenset()
    covers: frozenset[str] = frozenset()
    """The resources the guarantee speaks about, zeros included."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "covers", frozenset(set(self.covers) | set(self.guarantee)))
        object.__setattr__(
            self, "borrow_limited", frozenset(set(self.borrow_limited) | set(self.borrow_limit))
        )
        object.__setattr__(
            self, "lend_limited", frozenset(set(self.lend_limited) | set(self.lending_limit))
        )


@dataclass(frozen=True)
class CohortSpec:
    """A cohort given its own guarantee, limits or fair-share weight (Kueue's Cohort object).
    Cohorts that teams' paths name exist without a spec: no guarantee, no limits, weight 1."""

    name: str
    parent: CohortPath = ()
    quotas: tuple[CohortQuota, ...] = ()
    fair_share_weight: int = 1

    @property
    def path(self) -> CohortPath:
        return (*self.parent, self.name)

    def __post_init__(self) -> None:
        where = f"cohort {'/'.join(self.path)}"
        if not self.name:
            raise InvalidInputError("a cohort has no name", hint="give every cohort a name")
        if self.name in self.parent:
            raise InvalidInputError(
                f"cohort {self.name} is its own ancestor",
                where=where,
                hint="a cohort's parent path must not name the cohort itself",
            )
        if not 0 <= self.fair_share_weight <= MAX_WEIGHT:
            raise InvalidInputError(
                f"fair-share weight {self.fair_share_weight}",
                where=where,
                hint=f"use a weight from 0 to {MAX_WEIGHT}",
            )
        if len({quota.flavor for quota in self.quotas}) != len(self.quotas):
            raise InvalidInputError(
                "a flavor is listed twice", where=where, hint="give one quota per flavor"
            )
        for quota in self.quotas:
            named = quota.covers | quota.borrow_limited | quota.lend_limited
            _check_quota_names(named, quota.flavor, where)

    def quota_for(self, flavor: FlavorName) -> CohortQuota | None:
        for quota in self.quotas:
            if quota.flavor == flavor:
                return quota
        return None


def _check_quota_names(names: frozenset[str], flavor: FlavorName, where: str) -> None:
    """Quotas count GPUs as whole ``nvidia.com/gpu`` (a pod's share of one counts as its part
    of a GPU): the resources the scheduler derives for shares are never a quota's."""
    derived = sorted(name for name in names if is_derived_gpu_resource(name))
    if derived:
        raise InvalidInputError(
            f"the quota of {flavor} names {derived[0]}, which the scheduler derives from "
            f"{NVIDIA_GPU}",
            where=where,
            hint=f"write the quota in whole GPUs as {NVIDIA_GPU} (e.g. {NVIDIA_GPU}: 2); a "
            "pod's share of a GPU counts against it as that part of one GPU",
        )


def _check_cohorts(teams: tuple[TeamSpec, ...], cohorts: tuple[CohortSpec, ...]) -> None:
    """Declared cohorts are distinct, their parents exist, and a declared cohort's name means
    the same place everywhere (teams' paths may not put it under another parent)."""
    declared: dict[str, CohortPath] = {}
    for cohort in cohorts:
        where = f"cohort {'/'.join(cohort.path)}"
        if cohort.name in declared:
            other = "/".join(declared[cohort.name])
            raise InvalidInputError(
                f"cohort {cohort.name} is declared twice (also as {other})",
                where=where,
                hint="declare every cohort once; its name means one place in the tree",
            )
        declared[cohort.name] = cohort.path
    paths = [(f"team {team.name}", team.cohort) for team in teams]
    paths += [(f"cohort {c.name}", c.parent) for c in cohorts]
    for owner, path in paths:
        for depth, name in enumerate(path):
            if name in declared and declared[name] != path[: depth + 1]:
                raise InvalidInputError(
                    f"cohort path {'/'.join(path)} puts cohort {name} under "
                    f"{'/'.join(path[:depth]) or 'the top'}, but it is declared under "
                    f"{'/'.join(declared[name][:-1]) or 'the top'}",
                    where=owner,
                    hint=f"write the path as {'/'.join(declared[name])}",
                )
    known = {team.cohort[:depth] for team in teams for depth in range(1, len(team.cohort) + 1)}
    known |= {cohort.path for cohort in cohorts}
    for cohort in cohorts:
        if cohort.parent and cohort.parent not in known:
            raise InvalidInputError(
                f"parent {'/'.join(cohort.parent)} of cohort {cohort.name} is not a cohort",
                where=f"cohort {'/'.join(cohort.path)}",
                hint="declare the parent too, or name one of the teams' cohort paths "
                "(outermost first)",
            )


@dataclass(frozen=True)
class PriorityClass:
    name: str
    weight: int
    time_limit_s: float | None = None
    """The time limit of the class's jobs that set none themselves (None: unlimited)."""

    def __post_init__(self) -> None:
        if not 0 <= self.weight <= MAX_WEIGHT:
            raise InvalidInputError(
                f"weight {self.weight}",
                where=f"priority class {self.name!r}",
                hint=f"use a weight from 0 to {MAX_WEIGHT}",
            )
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise InvalidInputError(
                f"time limit {self.time_limit_s}",
                where=f"priority class {self.name!r}",
                hint="give a time limit of more than 0 seconds, or none",
            )


DEFAULT_PREEMPTION_GRACE_S = 30
MAX_PREEMPTION_GRACE_S = 3600


@dataclass(frozen=True)
class ClusterPolicy:
    teams: tuple[TeamSpec, ...] = ()
    prioritization: Prioritization = Prioritization.PRIORITY
    priority_classes: tuple[PriorityClass, ...] = ()
    default_priority_class: str | None = None
    idle_allocation: IdleAllocation = IdleAllocation.FIRST_COME
    idle_resource_sharing: bool = True
    """Capacity that no team is guaranteed may be borrowed."""
    preemption_grace_s: int = DEFAULT_PREEMPTION_GRACE_S
    """How long a victim's pods have between SIGTERM and the kill (``preemption.gracePeriodS``)."""
    cohorts: tuple[CohortSpec, ...] = ()
    """Cohorts with a guarantee, limits or weight of their own (others need no spec)."""
    starvation_guard_s: float = DEFAULT_STARVATION_GUARD_S
    """After a job has waited this long, the capacity it needs is held for it (0: off)."""
    fair_share_usage_half_life_s: float = DEFAULT_USAGE_HALF_LIFE_S
    """Under fair share, how fast each team's usage of borrowed capacity is forgotten (see
    ``topoq.core.fair_share``); 0: only what teams borrow now counts."""
    queue_order: QueueOrder = QueueOrder.SUBMISSION
    """The order of the jobs of one priority (``QueueOrder``)."""
    by_team: Mapping[TeamName, TeamSpec] = field(init=False, repr=False, compare=False)
    by_cohort: Mapping[CohortPath, CohortSpec] = field(init=False, repr=False, compare=False)
    weight_of_class: Mapping[str, int] = field(init=False, repr=False, compare=False)
    time_limit_of_class: Mapping[str, float | None] = field(init=False, repr=False, compare=False)
    classes_limit_time: bool = field(init=False, repr=False, compare=False)
    """Whether some priority class gives its jobs a time limit (else only a job's own does)."""

    def __post_init__(self) -> None:
        if len(self.teams) > MAX_TEAMS:
            raise InvalidInputError(
                f"{len(self.teams):,} teams", hint=f"a policy has at most {MAX_TEAMS:,} teams"
            )
        names = [team.name for team in self.teams]
        repeated = sorted(name for name, times in Counter(names).items() if times > 1)
        if repeated:
            raise InvalidInputError(
                f"team {repeated[0]!r} is defined twice", hint="give every team a distinct name"
            )
        if len(self.priority_classes) > MAX_PRIORITY_CLASSES:
            raise InvalidInputError(
                f"{len(self.priority_classes)} priority classes",
                hint=f"use at most {MAX_PRIORITY_CLASSES}",
            )
        if not 0 <= self.starvation_guard_s < float("inf"):
            raise InvalidInputError(
                f"starvation guard {self.starvation_guard_s}",
                hint="give 0 (off) or a number of seconds",
            )
        if not 0 <= self.fair_share_usage_half_life_s <= MAX_USAGE_HALF_LIFE_S:
            raise InvalidInputError(
                f"usage half-life {self.fair_share_usage_half_life_s} s",
                where="scheduling.fairShare.usageHalfLifeS",
                hint=f"use 0 (no history) to {MAX_USAGE_HALF_LIFE_S:.0f} seconds",
            )
        classes = {cls.name: cls.weight for cls in self.priority_classes}
        if len(classes) != len(self.priority_classes):
            raise InvalidInputError(
                "a priority class is defined twice",
                hint="give every priority class a distinct name",
            )
        if self.default_priority_class and self.default_priority_class not in classes:
            raise InvalidInputError(
                f"default priority class {self.default_priority_class!r} is not defined",
                hint="define it under priority classes, or remove the default",
            )
        if len(self.cohorts) > MAX_COHORTS:
            raise InvalidInputError(
                f"{len(self.cohorts):,} cohorts",
                hint=f"a policy declares at most {MAX_COHORTS:,} cohorts",
            )
        _check_cohorts(self.teams, self.cohorts)
        object.__setattr__(self, "by_team", MappingProxyType({t.name: t for t in self.teams}))
        object.__setattr__(self, "by_cohort", MappingProxyType({c.path: c for c in self.cohorts}))
        object.__setattr__(self, "weight_of_class", MappingProxyType(classes))
        object.__setattr__(
            self,
            "time_limit_of_class",
            MappingProxyType({cls.name: cls.time_limit_s for cls in self.priority_classes}),
        )
        object.__setattr__(
            self,
            "classes_limit_time",
            any(cls.time_limit_s is not None for cls in self.priority_classes),
        )

    def class_time_limit_s(self, priority_class: str | None) -> float | None:
        """The time limit of a job of ``priority_class`` that sets none (the default class's
        when it names none), or None."""
        name = priority_class or self.default_priority_class
        return self.time_limit_of_class.get(name) if name else None

    def priority_of(self, priority_class: str | None) -> int:
        """The weight that orders a job: its class's, the default class's, else 0."""
        name = priority_class or self.default_priority_class
        return self.weight_of_class.get(name, 0) if name else 0
