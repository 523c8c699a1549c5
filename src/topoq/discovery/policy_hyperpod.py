"""Import a SageMaker HyperPod task-governance setup as a topoq policy.

Reads the JSON of ``aws sagemaker describe-cluster-scheduler-config`` (the cluster policy) and of
any number of ``aws sagemaker describe-compute-quota`` (one team each); a ``list-compute-quotas``
output (``{"ComputeQuotaSummaries": [...]}``) or a JSON list of quotas counts as several.

* ``SchedulerConfig.PriorityClasses[{Name, Weight}]`` → priority classes; prioritization is
  ``priority`` when there are classes, else ``fifo``. ``FairShare`` Enabled (HyperPod's default)
  → idle allocation ``fair-share``, Disabled → ``first-come``. ``IdleResourceSharing``
  Enabled (default) | Disabled. Without a scheduler config, HyperPod's defaults apply.
  HyperPod's fair share weighs what teams borrow now (Kueue's fair sharing) and keeps no usage
  history, so the imported policy's usage half-life is 0.
* ``ComputeQuotaTarget.TeamName`` → the team; ``FairShareWeight`` (HyperPod's default 0).
* ``ComputeQuotaConfig.ComputeQuotaResources[]``: per ``InstanceType``, ``Count`` whole
  instances, or ``Accelerators`` / ``VCpu`` / ``MemoryInGiB`` with what is not given in the same
  proportion of an instance (:mod:`topoq.discovery.policy_sizing`). An absolute borrow limit
  limits the resources its entry gives or derives; the others follow ``BorrowLimit``.
* ``ResourceSharingConfig``: ``Strategy`` (default LendAndBorrow), ``BorrowLimit`` percent of the
  guarantee (default 50), ``AbsoluteBorrowLimits[]`` in the same shape as the resources,
  absolute per resource they give. ``PreemptTeamTasks`` (default LowerPriority).
* ``ActivationState`` Disabled → an inactive team. Quotas with ``Status`` Deleted are skipped.

Response metadata (ids, ARNs, times, status) is not checked; inside the configuration unknown
keys are rejected, so that a field topoq does not understand is never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from enum import StrEnum
from pathlib import Path

from topoq.discovery.documents import Fields, read_document
from topoq.discovery.instance_types import find_instance_type, known_instance_types
from topoq.discovery.own_format_fields import bounded, choice, reject_unknown_keys
from topoq.discovery.policy_sizing import (
    MAX_BORROW_LIMIT_PERCENT,
    instance_amounts,
    instance_quota,
    resolved_borrow_limit,
    share_quota,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import normalize_flavor
from topoq.domain.governance import (
    DEFAULT_BORROW_LIMIT_PERCENT,
    MAX_PRIORITY_CLASSES,
    MAX_TEAMS,
    MAX_WEIGHT,
    ClusterPolicy,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    PreemptTeamTasks,
    Prioritization,
    PriorityClass,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.names import check_label_name, check_label_value, check_subdomain_name
from topoq.domain.quantity import CPU, EFA, MEMORY, NEURON_DEVICE, NVIDIA_GPU, parse_quantity
from topoq.domain.resources import Resources

HYPERPOD_DEFAULT_FAIR_SHARE_WEIGHT = 0
HYPERPOD_USAGE_HALF_LIFE_S = 0.0
"""HyperPod keeps no fair-share usage history."""
_SCHEDULER_KEYS = ("PriorityClasses", "FairShare", "IdleResourceSharing")
_CLASS_KEYS = ("Name", "Weight")
_TARGET_KEYS = ("TeamName", "FairShareWeight")
_CONFIG_KEYS = ("ComputeQuotaResources", "ResourceSharingConfig", "PreemptTeamTasks")
_SHARING_KEYS = ("Strategy", "BorrowLimit", "AbsoluteBorrowLimits")
_RESOURCE_KEYS = ("InstanceType", "Count", "Accelerators", "VCpu", "MemoryInGiB")
_PARTITION_KEY = "AcceleratorPartition"
_SUMMARIES_KEY = "ComputeQuotaSummaries"
_DELETED = "Deleted"
_NEURON_FAMILIES = ("trn", "inf")


class Toggle(StrEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"


def load_hyperpod_policy(
    scheduler_config_path: Path | str | None, quota_paths: Sequence[Path | str]
) -> ClusterPolicy:
    """Read the describe-cluster-scheduler-config and describe-compute-quota files."""
    config = None
    if scheduler_config_path is not None:
        config = (read_document(scheduler_config_path), str(scheduler_config_path))
    quotas = [(read_document(path), str(path)) for path in quota_paths]
    return _hyperpod_policy(config, quotas)


def policy_from_hyperpod(
    scheduler_config: object | None, compute_quotas: Sequence[object], *, source: str
) -> ClusterPolicy:
    """The policy of parsed HyperPod documents; errors name ``source`` and the field path."""
    config = None if scheduler_config is None else (scheduler_config, source)
    quotas = [
        (quota, f"{source} (compute quota {index})") for index, quota in enumerate(compute_quotas)
    ]
    return _hyperpod_policy(config, quotas)


def _hyperpod_policy(
    config: tuple[object, str] | None, quotas: Sequence[tuple[object, str]]
) -> ClusterPolicy:
    teams: list[TeamSpec] = []
    seen: dict[str, str] = {}
    for document, source in quotas:
        for entry in _quota_entries(document, source):
            team = _team_in(entry, source)
            if team is None:
                continue
            where = f"{source}: {entry.where}" if entry.where else source
            if team.name in seen:
                raise InvalidInputError(
                    f"team {team.name!r} has a second compute quota",
                    where=where,
                    hint=f"also in {seen[team.name]}; HyperPod gives a team one compute quota",
                )
            seen[team.name] = where
            teams.append(team)
            if len(teams) > MAX_TEAMS:
                raise InvalidInputError(
                    f"more than {MAX_TEAMS:,} teams",
                    where=where,
                    hint=f"a policy has at most {MAX_TEAMS:,} teams",
                )
    if config is None:
        return ClusterPolicy(
            teams=tuple(teams),
            prioritization=Prioritization.FIFO,
            idle_allocation=IdleAllocation.FAIR_SHARE,
            fair_share_usage_half_life_s=HYPERPOD_USAGE_HALF_LIFE_S,
        )
    document, source = config
    try:
        return _cluster_policy(_scheduler_config(document), tuple(teams))
    except InvalidInputError as error:
        raise error.located(source) from None


def _quota_entries(document: object, source: str) -> list[Fields]:
    """The compute quotas of one document: a describe output, a list of them, or a
    list-compute-quotas output."""
    try:
        if isinstance(document, list):
            return [Fields(entry, f"[{index}]") for index, entry in enumerate(document)]
        fields = Fields(document, "")
        if fields.has(_SUMMARIES_KEY):
            return fields.records(_SUMMARIES_KEY)
        return [fields]
    except InvalidInputError as error:
        raise error.located(source) from None


def _team_in(entry: Fields, source: str) -> TeamSpec | None:
    try:
        return None if entry.text("Status", "") == _DELETED else _team(entry)
    except InvalidInputError as error:
        raise error.located(source) from None


def _scheduler_config(document: object) -> Fields:
    """``SchedulerConfig`` of a describe output, or the bare configuration."""
    fields = Fields(document, "")
    config = fields.mapping("SchedulerConfig") if fields.has("SchedulerConfig") else fields
    if config is fields and not any(fields.has(key) for key in _SCHEDULER_KEYS):
        raise InvalidInputError(
            "no SchedulerConfig",
            hint="give the JSON of 'aws sagemaker describe-cluster-scheduler-config'",
        )
    reject_unknown_keys(config, _SCHEDULER_KEYS, snake=False)
    return config


def _cluster_policy(config: Fields, teams: tuple[TeamSpec, ...]) -> ClusterPolicy:
    classes = _priority_classes(config)
    fair_share = choice(config, "FairShare", Toggle, Toggle.ENABLED)
    sharing = choice(config, "IdleResourceSharing", Toggle, Toggle.ENABLED)
    return ClusterPolicy(
        teams=teams,
        prioritization=Prioritization.PRIORITY if classes else Prioritization.FIFO,
        priority_classes=classes,
        idle_allocation=(
            IdleAllocation.FAIR_SHARE if fair_share is Toggle.ENABLED else IdleAllocation.FIRST_COME
        ),
        idle_resource_sharing=sharing is Toggle.ENABLED,
        fair_share_usage_half_life_s=HYPERPOD_USAGE_HALF_LIFE_S,
    )


def _priority_classes(config: Fields) -> tuple[PriorityClass, ...]:
    records = config.records("PriorityClasses")
    if len(records) > MAX_PRIORITY_CLASSES:
        raise InvalidInputError(
            f"{len(records)} priority classes",
            where=config.path("PriorityClasses"),
            hint=f"HyperPod allows at most {MAX_PRIORITY_CLASSES}",
        )
    classes: dict[str, PriorityClass] = {}
    for record in records:
        reject_unknown_keys(record, _CLASS_KEYS, snake=False)
        name = check_subdomain_name(
            record.text("Name"), what="priority class name", where=record.path("Name")
        )
        if name in classes:
            raise InvalidInputError(
                f"priority class {name!r} is defined twice",
                where=record.path("Name"),
                hint="give every class a distinct name",
            )
        classes[name] = PriorityClass(name, bounded(record, "Weight", 0, MAX_WEIGHT))
    return tuple(classes.values())


def _team(entry: Fields) -> TeamSpec:
    target = entry.mapping("ComputeQuotaTarget")
    reject_unknown_keys(target, _TARGET_KEYS, snake=False)
    config = entry.mapping("ComputeQuotaConfig")
    reject_unknown_keys(config, _CONFIG_KEYS, snake=False)
    sharing_config = config.mapping("ResourceSharingConfig")
    reject_unknown_keys(sharing_config, _SHARING_KEYS, snake=False)
    sharing = choice(sharing_config, "Strategy", SharingStrategy, SharingStrategy.LEND_AND_BORROW)
    return TeamSpec(
        name=TeamName(
            check_label_name(
                target.text("TeamName"), what="team name", where=target.path("TeamName")
            )
        ),
        quotas=_flavor_quotas(config, sharing_config, sharing),
        sharing=sharing,
        fair_share_weight=bounded(
            target, "FairShareWeight", 0, MAX_WEIGHT, HYPERPOD_DEFAULT_FAIR_SHARE_WEIGHT
        ),
        preempt_team_tasks=choice(
            config, "PreemptTeamTasks", PreemptTeamTasks, PreemptTeamTasks.LOWER_PRIORITY
        ),
        active=choice(entry, "ActivationState", Toggle, Toggle.ENABLED) is Toggle.ENABLED,
    )


def _flavor_quotas(
    config: Fields, sharing_config: Fields, sharing: SharingStrategy
) -> tuple[FlavorQuota, ...]:
    guarantees = _amounts_by_flavor(config, "ComputeQuotaResources")
    absolute = _amounts_by_flavor(sharing_config, "AbsoluteBorrowLimits")
    percent = bounded(
        sharing_config,
        "BorrowLimit",
        0,
        MAX_BORROW_LIMIT_PERCENT,
        DEFAULT_BORROW_LIMIT_PERCENT,
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
        quotas.append(FlavorQuota(flavor, guarantee, borrow, covers=frozenset(amounts)))
    return tuple(quotas)


def _amounts_by_flavor(fields: Fields, key: str) -> dict[FlavorName, dict[str, int]]:
    amounts: dict[FlavorName, dict[str, int]] = {}
    for record in fields.records(key):
        reject_unknown_keys(record, (*_RESOURCE_KEYS, _PARTITION_KEY), snake=False)
        flavor = normalize_flavor(
            check_label_value(
                record.text("InstanceType").strip(),
                what="instance type",
                where=record.path("InstanceType"),
            )
        )
        if flavor in amounts:
            raise InvalidInputError(
                f"instance type {flavor} is listed twice",
                where=record.path("InstanceType"),
                hint="give one entry per instance type",
            )
        amounts[flavor] = _resource_config(record, flavor)
    return amounts


def _resource_config(record: Fields, flavor: FlavorName) -> dict[str, int]:
    """The resources one ``ComputeQuotaResourceConfig`` names, zeros included."""
    if record.has(_PARTITION_KEY):
        raise InvalidInputError(
            "accelerator partitions (MIG) are not supported",
            where=record.path(_PARTITION_KEY),
            hint="give whole accelerators instead",
        )
    instance = find_instance_type(flavor)
    accelerators = bounded(record, "Accelerators", 0, 10**9) if record.has("Accelerators") else None
    cpu_millis = _scaled(record, "VCpu", CPU, "")
    memory_bytes = _scaled(record, "MemoryInGiB", MEMORY, "Gi")
    if record.has("Count"):
        if accelerators is not None or cpu_millis is not None or memory_bytes is not None:
            raise InvalidInputError(
                "Count is given with Accelerators, VCpu or MemoryInGiB",
                where=record.path("Count"),
                hint="give whole instances (Count) or amounts, not both",
            )
        if instance is None:
            raise _unknown_instance(record, flavor)
        count = bounded(record, "Count", 0, 10**9)
        return instance_amounts(instance, instance_quota(instance, count))
    if accelerators is None and cpu_millis is None and memory_bytes is None:
        raise InvalidInputError(
            "no amount is given",
            where=record.where,
            hint="give Count, or Accelerators, VCpu or MemoryInGiB",
        )
    if instance is None:
        given = {_accelerator_resource(flavor): accelerators, CPU: cpu_millis, MEMORY: memory_bytes}
        return {name: amount for name, amount in given.items() if amount is not None}
    share = share_quota(
        instance, accelerators=accelerators or 0, cpu_millis=cpu_millis, memory_bytes=memory_bytes
    )
    named = (
        (CPU, MEMORY) if accelerators is None else (CPU, MEMORY, instance.accelerator_resource, EFA)
    )
    return {name: share.amount(name) for name in named}


def _scaled(record: Fields, key: str, resource: str, suffix: str) -> int | None:
    """A number of vCPUs or GiB in canonical units (millicores, bytes), rounded up."""
    value = record.raw(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInputError(f"expected a number, got {value!r}", where=record.path(key))
    try:
        return parse_quantity(resource, f"{Decimal(str(value))}{suffix}")
    except (InvalidInputError, ArithmeticError):
        raise InvalidInputError(
            f"expected a number >= 0, got {value!r}", where=record.path(key)
        ) from None


def _accelerator_resource(flavor: FlavorName) -> str:
    return NEURON_DEVICE if flavor.startswith(_NEURON_FAMILIES) else NVIDIA_GPU


def _unknown_instance(record: Fields, flavor: FlavorName) -> InvalidInputError:
    return InvalidInputError(
        f"topoq does not know the instance type {flavor}, so it cannot size whole instances",
        where=record.path("Count"),
        hint="give Accelerators, VCpu and MemoryInGiB instead, or use a known instance type: "
        + ", ".join(known_instance_types()),
    )
