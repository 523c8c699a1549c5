"""topoq's policy file (YAML or JSON): teams, their quotas per flavor, and how work is ordered.

::

    apiVersion: topoq.io/v1
    kind: Policy
    metadata: {name: prod}
    scheduling:
      prioritization: priority            # fifo | priority (default: priority when classes exist)
      queueOrder: submission              # within a priority: submission (default) | shortest-first
      priorityClasses:                    # up to 10: name + weight 0-100; FIFO inside a class
      - {name: inference, weight: 100}
      - {name: training, weight: 10, timeLimit: 1-00:00:00}  # default limit of its jobs
      defaultPriorityClass: training
      starvationGuardS: 600               # hold capacity for a job waiting longer (0: off)
      idleAllocation: fair-share          # first-come (default) | fair-share
      idleResourceSharing: true           # capacity owned by no team becomes borrowable
      preemption:
        gracePeriodS: 30                  # 0-3600: SIGTERM, then SIGKILL for a victim's pods
      fairShare: {usageHalfLifeS: 86400}  # fair-share usage history fades (0: none)
    teams:
    - name: nlp
      cohort: [research, language]        # optional org → division path (outermost first)
      fairShareWeight: 50                 # 0-100, default 1
      sharing: LendAndBorrow              # DontLend | Lend | LendAndBorrow (default)
      borrowLimitPercent: 50              # of the guarantee, default 50
      absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 16}}
      lendingLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 32}}   # optional
      preemptTeamTasks: LowerPriority     # LowerPriority (default) | Never
      queueing: best-effort-fifo          # strict-fifo | best-effort-fifo (default)
      active: true                        # default true
      quotas:
      - flavor: ml.p5.48xlarge
        instances: 4                      # whole instances
      - flavor: ml.g5.12xlarge
        accelerators: 8                   # vCPU and memory in the same proportion
      - flavor: ml.p4d.24xlarge
        resources: {nvidia.com/gpu: 16, cpu: 192, memory: 2Ti}
    cohorts:                              # optional: cohorts with a quota or limits of their own
    - name: language
      parent: [research]                  # the path above it, outermost first (none: top)
      fairShareWeight: 2                  # 0-100, default 1: its weight among its siblings
      quotas: [{flavor: ml.p5.48xlarge, instances: 2}]   # shared by the teams below it
      absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 16}}  # the subtree takes in
      lendingLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 8}}          # the subtree lends out

Flavor names are normalized (``ml.p5.48xlarge`` is ``p5.48xlarge``); :mod:`policy_sizing
<topoq.discovery.policy_sizing>` says how instances and accelerators become resources and how
borrow limits resolve. A flavor topoq has no instance-type figures for takes ``resources`` only.
snake_case keys are accepted as well as camelCase. Unknown keys are rejected, with the closest
allowed key, so that a typo does not silently drop a rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from topoq.discovery.documents import Fields, read_document
from topoq.discovery.instance_types import find_instance_type, known_instance_types
from topoq.discovery.own_format_fields import (
    amounts_given,
    bounded,
    choice,
    optional_duration,
    reject_unknown_keys,
    spelling,
)
from topoq.discovery.policy_export import POLICY_API_VERSION, POLICY_KIND, policy_document
from topoq.discovery.policy_sizing import (
    MAX_BORROW_LIMIT_PERCENT,
    instance_amounts,
    instance_quota,
    resolved_borrow_limit,
    resolved_lending_limit,
    share_quota,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import normalize_flavor
from topoq.domain.governance import (
    DEFAULT_BORROW_LIMIT_PERCENT,
    DEFAULT_PREEMPTION_GRACE_S,
    DEFAULT_STARVATION_GUARD_S,
    DEFAULT_USAGE_HALF_LIFE_S,
    MAX_COHORTS,
    MAX_PREEMPTION_GRACE_S,
    MAX_PRIORITY_CLASSES,
    MAX_TEAMS,
    MAX_USAGE_HALF_LIFE_S,
    MAX_WEIGHT,
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    PreemptTeamTasks,
    Prioritization,
    PriorityClass,
    QueueingStrategy,
    QueueOrder,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.names import check_label_name, check_label_value, check_subdomain_name
from topoq.domain.resources import Resources

__all__ = [
    "MAX_BORROW_LIMIT_PERCENT",
    "POLICY_API_VERSION",
    "POLICY_KIND",
    "load_policy",
    "policy_document",
    "policy_from_document",
]

DEFAULT_FAIR_SHARE_WEIGHT = 1
_TOP_KEYS = ("apiVersion", "kind", "metadata", "scheduling", "teams", "cohorts")
_METADATA_KEYS = ("name",)
_SCHEDULING_KEYS = (
    "prioritization",
    "queueOrder",
    "priorityClasses",
    "defaultPriorityClass",
    "idleAllocation",
    "idleResourceSharing",
    "preemption",
    "starvationGuardS",
    "fairShare",
)
_PREEMPTION_KEYS = ("gracePeriodS",)
_FAIR_SHARE_KEYS = ("usageHalfLifeS",)
_CLASS_KEYS = ("name", "weight", "timeLimit")
_TEAM_KEYS = (
    "name",
    "cohort",
    "fairShareWeight",
    "sharing",
    "borrowLimitPercent",
    "absoluteBorrowLimits",
    "lendingLimits",
    "preemptTeamTasks",
    "queueing",
    "active",
    "quotas",
)
_COHORT_KEYS = (
    "name",
    "parent",
    "fairShareWeight",
    "quotas",
    "absoluteBorrowLimits",
    "lendingLimits",
)
_QUOTA_KEYS = ("flavor", "instances", "accelerators", "resources")
_QUOTA_AMOUNT_KEYS = ("instances", "accelerators", "resources")


def load_policy(path: Path | str) -> ClusterPolicy:
    """Read a topoq policy file; every error names the file and the field."""
    return policy_from_document(read_document(path), source=str(path))


def policy_from_document(doc: object, *, source: str) -> ClusterPolicy:
    """A parsed policy file (see the module documentation)."""
    try:
        return _policy(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _policy(fields: Fields) -> ClusterPolicy:
    reject_unknown_keys(fields, _TOP_KEYS)
    for key, expected in (("apiVersion", POLICY_API_VERSION), ("kind", POLICY_KIND)):
        if fields.text(key, "") != expected:
            raise InvalidInputError(
                f"expected {expected!r}, got {fields.text(key, '')!r}",
                where=fields.path(key),
                hint=f"a topoq policy has apiVersion {POLICY_API_VERSION} and kind {POLICY_KIND}",
            )
    reject_unknown_keys(fields.mapping("metadata"), _METADATA_KEYS)
    scheduling = fields.mapping("scheduling")
    reject_unknown_keys(scheduling, _SCHEDULING_KEYS)
    classes = _priority_classes(scheduling)
    teams = [_team(record) for record in _team_records(fields)]
    _reject_repeated_teams(teams, fields.path("teams"))
    default_key = spelling(scheduling, "defaultPriorityClass")
    return ClusterPolicy(
        teams=tuple(teams),
        prioritization=choice(
            scheduling,
            "prioritization",
            Prioritization,
            Prioritization.PRIORITY if classes else Prioritization.FIFO,
        ),
        queue_order=choice(
            scheduling, spelling(scheduling, "queueOrder"), QueueOrder, QueueOrder.SUBMISSION
        ),
        priority_classes=classes,
        default_priority_class=_default_class(scheduling, default_key, classes),
        idle_allocation=choice(
            scheduling,
            spelling(scheduling, "idleAllocation"),
            IdleAllocation,
            IdleAllocation.FIRST_COME,
        ),
        idle_resource_sharing=scheduling.boolean(
            spelling(scheduling, "idleResourceSharing"), default=True
        ),
        preemption_grace_s=_preemption_grace_s(scheduling),
        cohorts=tuple(_cohort_spec(record) for record in _cohort_records(fields)),
        starvation_guard_s=_starvation_guard(scheduling),
        fair_share_usage_half_life_s=_usage_half_life_s(scheduling),
    )


def _preemption_grace_s(scheduling: Fields) -> int:
    preemption = scheduling.mapping("preemption")
    reject_unknown_keys(preemption, _PREEMPTION_KEYS)
    key = spelling(preemption, "gracePeriodS")
    return bounded(preemption, key, 0, MAX_PREEMPTION_GRACE_S, DEFAULT_PREEMPTION_GRACE_S)


def _starvation_guard(scheduling: Fields) -> float:
    guard = optional_duration(scheduling, "starvationGuardS", allow_zero=True)
    return DEFAULT_STARVATION_GUARD_S if guard is None else guard


def _usage_half_life_s(scheduling: Fields) -> float:
    """``fairShare.usageHalfLifeS``: whole seconds, 0 (no usage history) to a year."""
    fair_share = scheduling.mapping(spelling(scheduling, "fairShare"))
    reject_unknown_keys(fair_share, _FAIR_SHARE_KEYS)
    key = spelling(fair_share, "usageHalfLifeS")
    default = int(DEFAULT_USAGE_HALF_LIFE_S)
    return float(bounded(fair_share, key, 0, int(MAX_USAGE_HALF_LIFE_S), default))


def _priority_classes(scheduling: Fields) -> tuple[PriorityClass, ...]:
    key = spelling(scheduling, "priorityClasses")
    records = scheduling.records(key)
    if len(records) > MAX_PRIORITY_CLASSES:
        raise InvalidInputError(
            f"{len(records)} priority classes",
            where=scheduling.path(key),
            hint=f"define at most {MAX_PRIORITY_CLASSES}",
        )
    classes: list[PriorityClass] = []
    seen: dict[str, str] = {}
    for record in records:
        reject_unknown_keys(record, _CLASS_KEYS)
        name = check_subdomain_name(
            record.text("name"), what="priority class name", where=record.path("name")
        )
        if name in seen:
            raise InvalidInputError(
                f"priority class {name!r} is defined twice",
                where=record.path("name"),
                hint=f"also at {seen[name]}; give every class a distinct name",
            )
        seen[name] = record.path("name")
        weight = bounded(record, "weight", 0, MAX_WEIGHT)
        classes.append(PriorityClass(name, weight, optional_duration(record, "timeLimit")))
    return tuple(classes)


def _default_class(scheduling: Fields, key: str, classes: Iterable[PriorityClass]) -> str | None:
    name = scheduling.optional_text(key)
    defined = [cls.name for cls in classes]
    if name is not None and name not in defined:
        raise InvalidInputError(
            f"priority class {name!r} is not defined",
            where=scheduling.path(key),
            hint=f"use one of {', '.join(defined)}" if defined else "define it in priorityClasses",
        )
    return name


def _team_records(fields: Fields) -> list[Fields]:
    records = fields.records("teams")
    if len(records) > MAX_TEAMS:
        raise InvalidInputError(
            f"{len(records):,} teams",
            where=fields.path("teams"),
            hint=f"a policy has at most {MAX_TEAMS:,} teams",
        )
    return records


def _cohort_records(fields: Fields) -> list[Fields]:
    records = fields.records("cohorts")
    if len(records) > MAX_COHORTS:
        raise InvalidInputError(
            f"{len(records):,} cohorts",
            where=fields.path("cohorts"),
            hint=f"a policy declares at most {MAX_COHORTS:,} cohorts",
        )
    return records


def _reject_repeated_teams(teams: Iterable[TeamSpec], where: str) -> None:
    seen: dict[str, int] = {}
    for index, team in enumerate(teams):
        if team.name in seen:
            raise InvalidInputError(
                f"team {team.name!r} is defined twice",
                where=f"{where}[{index}].name",
                hint=f"also at {where}[{seen[team.name]}]; give every team a distinct name",
            )
        seen[team.name] = index


def _team(record: Fields) -> TeamSpec:
    reject_unknown_keys(record, _TEAM_KEYS)
    name = check_label_name(record.text("name"), what="team name", where=record.path("name"))
    sharing = choice(record, "sharing", SharingStrategy, SharingStrategy.LEND_AND_BORROW)
    return TeamSpec(
        name=TeamName(name),
        quotas=_flavor_quotas(record, sharing),
        sharing=sharing,
        fair_share_weight=bounded(
            record, spelling(record, "fairShareWeight"), 0, MAX_WEIGHT, DEFAULT_FAIR_SHARE_WEIGHT
        ),
        preempt_team_tasks=choice(
            record,
            spelling(record, "preemptTeamTasks"),
            PreemptTeamTasks,
            PreemptTeamTasks.LOWER_PRIORITY,
        ),
        cohort=_cohort(record, "cohort"),
        queueing=choice(record, "queueing", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO),
        active=record.boolean("active", default=True),
    )


def _cohort(record: Fields, key: str) -> CohortPath:
    value = record.raw(key)
    levels = [value] if isinstance(value, str) else record.items(key)
    for index, level in enumerate(levels):
        where = f"{record.path(key)}[{index}]"
        if not isinstance(level, str) or not level:
            raise InvalidInputError(
                f"expected a name, got {level!r:.60}",
                where=where,
                hint="list organisation names, outermost first, e.g. [research, language]",
            )
        check_label_name(level, what="cohort name", where=where)
    return tuple(levels)


def _cohort_spec(record: Fields) -> CohortSpec:
    """A cohort's own guarantee (``quotas``, as a team's) and the limits on its subtree: only
    absolute limits, for the resources they name (a cohort's own guarantee is often zero, so
    a percentage of it would say nothing)."""
    reject_unknown_keys(record, _COHORT_KEYS)
    name = check_label_name(record.text("name"), what="cohort name", where=record.path("name"))
    guarantees = _guarantees(record)
    borrow = _flavor_amounts(record, spelling(record, "absoluteBorrowLimits"))
    lending = _flavor_amounts(record, spelling(record, "lendingLimits"))
    quotas = [
        CohortQuota(
            flavor,
            Resources(guarantees.get(flavor, {})),
            Resources(borrow.get(flavor, {})),
            Resources(lending.get(flavor, {})),
            borrow_limited=frozenset(borrow.get(flavor, {})),
            lend_limited=frozenset(lending.get(flavor, {})),
            covers=frozenset(guarantees.get(flavor, {})),
        )
        for flavor in dict.fromkeys([*guarantees, *borrow, *lending])
    ]
    return CohortSpec(
        name=name,
        parent=_cohort(record, "parent"),
        quotas=tuple(quotas),
        fair_share_weight=bounded(
            record, spelling(record, "fairShareWeight"), 0, MAX_WEIGHT, DEFAULT_FAIR_SHARE_WEIGHT
        ),
    )


def _flavor_quotas(record: Fields, sharing: SharingStrategy) -> tuple[FlavorQuota, ...]:
    guarantees = _guarantees(record)
    percent = bounded(
        record,
        spelling(record, "borrowLimitPercent"),
        0,
        MAX_BORROW_LIMIT_PERCENT,
        DEFAULT_BORROW_LIMIT_PERCENT,
    )
    absolute = _flavor_amounts(record, spelling(record, "absoluteBorrowLimits"))
    lending_key = spelling(record, "lendingLimits")
    lending = _flavor_amounts(record, lending_key)
    for flavor in lending:
        if flavor not in guarantees:
            raise InvalidInputError(
                f"a lending limit for {flavor}, which the team has no quota for",
                where=record.path(lending_key),
                hint="add a quota for the flavor, or remove its lending limit",
            )
    flavors = list(guarantees) + [flavor for flavor in absolute if flavor not in guarantees]
    quotas: list[FlavorQuota] = []
    for flavor in flavors:
        amounts = guarantees.get(flavor, {})
        guarantee = Resources(amounts)
        limit = absolute.get(flavor, {})
        borrow = (
            resolved_borrow_limit(guarantee, percent, limit)
            if sharing.borrows
            else Resources(limit)
        )
        lend = resolved_lending_limit(guarantee, lending[flavor]) if flavor in lending else None
        quotas.append(FlavorQuota(flavor, guarantee, borrow, lend, covers=frozenset(amounts)))
    return tuple(quotas)


def _guarantees(record: Fields) -> dict[FlavorName, dict[str, int]]:
    """Per flavor, the guaranteed amount of every resource the quota names, zeros included."""
    guarantees: dict[FlavorName, dict[str, int]] = {}
    seen: dict[FlavorName, str] = {}
    for quota in record.records("quotas"):
        reject_unknown_keys(quota, _QUOTA_KEYS)
        flavor = _flavor(quota.text("flavor"), quota.path("flavor"))
        if flavor in seen:
            raise InvalidInputError(
                f"flavor {flavor} has two quotas",
                where=quota.path("flavor"),
                hint=f"also at {seen[flavor]}; give one quota per flavor",
            )
        seen[flavor] = quota.path("flavor")
        guarantees[flavor] = _guarantee(quota, flavor)
    return guarantees


def _guarantee(quota: Fields, flavor: FlavorName) -> dict[str, int]:
    given = [key for key in _QUOTA_AMOUNT_KEYS if quota.has(key)]
    if len(given) != 1:
        found = f"{' and '.join(given)} are given" if given else "no amount is given"
        raise InvalidInputError(
            found,
            where=quota.where,
            hint="give exactly one of instances, accelerators or resources",
        )
    if given[0] == "resources":
        return amounts_given(quota.mapping("resources"))
    instance = find_instance_type(flavor)
    if instance is None:
        raise InvalidInputError(
            f"topoq does not know the instance type {flavor}, so it cannot size {given[0]}",
            where=quota.path(given[0]),
            hint="give resources (e.g. {nvidia.com/gpu: 16, cpu: 192, memory: 2Ti}), or use "
            f"a known instance type: {', '.join(known_instance_types())}",
        )
    amount = bounded(quota, given[0], 0, 10**9)
    sized = (
        instance_quota(instance, amount)
        if given[0] == "instances"
        else share_quota(instance, accelerators=amount)
    )
    return instance_amounts(instance, sized)


def _flavor_amounts(record: Fields, key: str) -> dict[FlavorName, dict[str, int]]:
    """``{flavor: {resource: quantity}}`` with normalized flavors; explicit zeros are kept."""
    by_flavor = record.mapping(key)
    amounts: dict[FlavorName, dict[str, int]] = {}
    for raw in by_flavor.data:
        where = by_flavor.path(str(raw))
        flavor = _flavor(str(raw), where)
        if flavor in amounts:
            raise InvalidInputError(
                f"flavor {flavor} is listed twice",
                where=where,
                hint="ml. names and EC2 names are the same flavor; keep one",
            )
        amounts[flavor] = amounts_given(Fields(by_flavor.data[raw], where))
    return amounts


def _flavor(text: str, where: str) -> FlavorName:
    """A flavor names the value of the nodes' instance-type label, so it follows that rule."""
    return normalize_flavor(check_label_value(text.strip(), what="flavor", where=where))
