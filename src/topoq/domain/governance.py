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
from topoq.domain.resources import Resources

TeamName = NewType("TeamName", str)
FlavorName = NewType("FlavorName", str)

DEFAULT_BORROW_LIMIT_PERCENT = 50
MAX_PRIORITY_CLASSES = 10
MAX_TEAMS = 1000
"""Teams in one policy (each is a queue the cycle visits and a row of every report)."""
MAX_WEIGHT = 100
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

    def quota_for(self, flavor: FlavorName) -> FlavorQuota | None:
        for quota in self.quotas:
            if quota.flavor == flavor:
                return quota
        return None


@dataclass(frozen=True)
class PriorityClass:
    name: str
    weight: int

    def __post_init__(self) -> None:
        if not 0 <= self.weight <= MAX_WEIGHT:
            raise InvalidInputError(
                f"weight {self.weight}",
                where=f"priority class {self.name!r}",
                hint=f"use a weight from 0 to {MAX_WEIGHT}",
            )


@dataclass(frozen=True)
class ClusterPolicy:
    teams: tuple[TeamSpec, ...] = ()
    prioritization: Prioritization = Prioritization.PRIORITY
    priority_classes: tuple[PriorityClass, ...] = ()
    default_priority_class: str | None = None
    idle_allocation: IdleAllocation = IdleAllocation.FIRST_COME
    idle_resource_sharing: bool = True
    """Capacity that no team is guaranteed may be borrowed."""
    fair_share_usage_half_life_s: float = DEFAULT_USAGE_HALF_LIFE_S
    """Under fair share, how fast each team's usage of borrowed capacity is forgotten (see
    ``topoq.core.fair_share``); 0: only what teams borrow now counts."""
    by_team: Mapping[TeamName, TeamSpec] = field(init=False, repr=False, compare=False)
    weight_of_class: Mapping[str, int] = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "by_team", MappingProxyType({t.name: t for t in self.teams}))
        object.__setattr__(self, "weight_of_class", MappingProxyType(classes))

    def priority_of(self, priority_class: str | None) -> int:
        """The weight that orders a job: its class's, the default class's, else 0."""
        name = priority_class or self.default_priority_class
        return self.weight_of_class.get(name, 0) if name else 0
