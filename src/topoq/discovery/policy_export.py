"""Writing a :class:`ClusterPolicy` as topoq's policy file; reading it back gives the same policy.

Guarantees are written in the shortest form that reads back the same: ``instances`` when they
are whole instances of a known type, ``accelerators`` when vCPU and memory follow the
accelerators, else ``resources``. Borrow limits are written as the percentage that explains
most of them, with the rest as absolute limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topoq.discovery.instance_types import find_instance_type
from topoq.discovery.policy_sizing import (
    MAX_BORROW_LIMIT_PERCENT,
    PERCENT,
    instance_quota,
    share_quota,
)
from topoq.domain.governance import (
    DEFAULT_BORROW_LIMIT_PERCENT,
    DEFAULT_PREEMPTION_GRACE_S,
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorQuota,
    PriorityClass,
    QueueOrder,
    TeamSpec,
)
from topoq.domain.quantity import format_quantity
from topoq.domain.resources import Resources

POLICY_API_VERSION = "topoq.io/v1"
POLICY_KIND = "Policy"
DEFAULT_POLICY_NAME = "policy"


def policy_document(policy: ClusterPolicy, *, name: str | None = None) -> dict[str, Any]:
    """The policy file of ``policy`` (:func:`topoq.discovery.policy.policy_from_document`
    reads it back to an equal policy)."""
    document = {
        "apiVersion": POLICY_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {"name": name or DEFAULT_POLICY_NAME},
        "scheduling": _scheduling_document(policy),
        "teams": [_team_document(team) for team in policy.teams],
    }
    if policy.cohorts:
        document["cohorts"] = [_cohort_document(cohort) for cohort in policy.cohorts]
    return document


def _cohort_document(cohort: CohortSpec) -> dict[str, Any]:
    document: dict[str, Any] = {"name": cohort.name}
    if cohort.parent:
        document["parent"] = list(cohort.parent)
    document["fairShareWeight"] = cohort.fair_share_weight
    for key, amounts in (
        (
            "absoluteBorrowLimits",
            {q.flavor: (q.borrow_limit, q.borrow_limited) for q in cohort.quotas},
        ),
        ("lendingLimits", {q.flavor: (q.lending_limit, q.lend_limited) for q in cohort.quotas}),
    ):
        limits = {
            str(flavor): _named_amounts(limit, names)
            for flavor, (limit, names) in amounts.items()
            if names
        }
        if limits:
            document[key] = limits
    document["quotas"] = [
        {"flavor": str(quota.flavor), "resources": _covered_amounts(quota)}
        for quota in cohort.quotas
        if quota.covers
    ]
    return document


def _named_amounts(amounts: Resources, names: Iterable[str]) -> dict[str, int | str]:
    return {name: quantity(name, amounts.amount(name)) for name in sorted(names)}


def _scheduling_document(policy: ClusterPolicy) -> dict[str, Any]:
    document: dict[str, Any] = {
        "prioritization": policy.prioritization.value,
    }
    if policy.queue_order is not QueueOrder.SUBMISSION:
        document["queueOrder"] = policy.queue_order.value
    document |= {
        "priorityClasses": [_class_document(cls) for cls in policy.priority_classes],
    }
    if policy.default_priority_class:
        document["defaultPriorityClass"] = policy.default_priority_class
    document["idleAllocation"] = policy.idle_allocation.value
    document["idleResourceSharing"] = policy.idle_resource_sharing
    if policy.preemption_grace_s != DEFAULT_PREEMPTION_GRACE_S:
        document["preemption"] = {"gracePeriodS": policy.preemption_grace_s}
    document["starvationGuardS"] = policy.starvation_guard_s
    document["fairShare"] = {"usageHalfLifeS": _whole(policy.fair_share_usage_half_life_s)}
    return document


def _class_document(cls: PriorityClass) -> dict[str, Any]:
    document: dict[str, Any] = {"name": cls.name, "weight": cls.weight}
    if cls.time_limit_s is not None:
        document["timeLimit"] = cls.time_limit_s
    return document


def _whole(seconds: float) -> int | float:
    """Seconds as the file gives them: whole (a policy read from a file always is)."""
    return int(seconds) if seconds == int(seconds) else seconds


def _team_document(team: TeamSpec) -> dict[str, Any]:
    document: dict[str, Any] = {"name": str(team.name)}
    if team.cohort:
        document["cohort"] = list(team.cohort)
    document["fairShareWeight"] = team.fair_share_weight
    document["sharing"] = team.sharing.value
    document.update(_borrow_document(team))
    lending = {
        str(quota.flavor): _lending_amounts(quota.lending_limit, quota.guarantee)
        for quota in team.quotas
        if quota.lending_limit is not None
    }
    if lending:
        document["lendingLimits"] = lending
    document["preemptTeamTasks"] = team.preempt_team_tasks.value
    document["queueing"] = team.queueing.value
    if not team.active:
        document["active"] = False
    document["quotas"] = [_quota_document(quota) for quota in team.quotas]
    return document


def _borrow_document(team: TeamSpec) -> dict[str, Any]:
    """``borrowLimitPercent`` and the ``absoluteBorrowLimits`` the percentage does not explain."""
    percent = _best_percent(team.quotas) if team.sharing.borrows else 0
    absolute: dict[str, dict[str, int | str]] = {}
    for quota in team.quotas:
        differing = _differing(quota, percent)
        if differing:
            absolute[str(quota.flavor)] = {
                name: quantity(name, quota.borrow_limit.amount(name)) for name in differing
            }
    document: dict[str, Any] = {}
    if team.sharing.borrows:
        document["borrowLimitPercent"] = percent
    if absolute:
        document["absoluteBorrowLimits"] = absolute
    return document


def _differing(quota: FlavorQuota, percent: int) -> list[str]:
    """Resources whose borrow limit is not ``percent`` of the guarantee."""
    names = sorted(set(quota.guarantee) | set(quota.borrow_limit))
    return [
        name
        for name in names
        if quota.borrow_limit.amount(name) != quota.guarantee.amount(name) * percent // PERCENT
    ]


def _best_percent(quotas: Iterable[FlavorQuota]) -> int:
    """The percentage that leaves the fewest absolute limits (the default wins ties)."""
    quotas = list(quotas)
    candidates = {DEFAULT_BORROW_LIMIT_PERCENT}
    for quota in quotas:
        for name, guaranteed in quota.guarantee.items():
            limit = quota.borrow_limit.amount(name)
            smallest = -(-limit * PERCENT // guaranteed)  # the smallest that rounds to it
            if smallest <= MAX_BORROW_LIMIT_PERCENT:
                candidates.add(smallest)
    return min(
        sorted(candidates),
        key=lambda percent: (
            sum(len(_differing(quota, percent)) for quota in quotas),
            percent != DEFAULT_BORROW_LIMIT_PERCENT,
        ),
    )


def _quota_document(quota: FlavorQuota) -> dict[str, Any]:
    document: dict[str, Any] = {"flavor": str(quota.flavor)}
    document.update(_sized_guarantee(quota) or {"resources": _covered_amounts(quota)})
    return document


def _sized_guarantee(quota: FlavorQuota) -> dict[str, Any] | None:
    """``instances`` or ``accelerators`` when they read back as this very quota."""
    instance = find_instance_type(quota.flavor)
    if instance is None:
        return None
    limits = set(quota.borrow_limit) | set(quota.lending_limit or ())
    if quota.covers != frozenset(set(instance_quota(instance)) | limits):
        return None
    guarantee = quota.guarantee
    accelerators = guarantee.amount(instance.accelerator_resource)
    whole, part = divmod(accelerators, instance.accelerators)
    if not part and guarantee == instance_quota(instance, whole):
        return {"instances": whole}
    if guarantee == share_quota(instance, accelerators=accelerators):
        return {"accelerators": accelerators}
    return None


def _covered_amounts(quota: FlavorQuota | CohortQuota) -> dict[str, int | str]:
    """Every resource the quota speaks about, zeros included."""
    return _named_amounts(quota.guarantee, quota.covers)


def _lending_amounts(limit: Resources, guarantee: Resources) -> dict[str, int | str]:
    """The resources whose lending limit is not the whole guarantee, zeros written out (a
    resource left out reads back as the whole guarantee)."""
    names = sorted(set(limit) | set(guarantee))
    return {
        name: quantity(name, limit.amount(name))
        for name in names
        if limit.amount(name) != guarantee.amount(name)
    }


def quantity(name: str, amount: int) -> int | str:
    """A quantity as a document holds it: a plain number when it is one, else text (``2Ti``)."""
    text = format_quantity(name, amount)
    return int(text) if text.isdigit() else text
