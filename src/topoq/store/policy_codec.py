"""JSON codecs for the governance policy and for a cycle's decisions (see ``codec`` for the
conventions: exact round trips, defaults for optional fields)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topoq.domain.decisions import (
    Admit,
    Cancel,
    Diagnostic,
    PendingReason,
    Preempt,
    PreemptionCause,
    Requeue,
    RequeueCause,
)
from topoq.domain.governance import (
    DEFAULT_PREEMPTION_GRACE_S,
    DEFAULT_STARVATION_GUARD_S,
    DEFAULT_USAGE_HALF_LIFE_S,
    ClusterPolicy,
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
from topoq.domain.job import JobId
from topoq.store.codec import Document, decode_allocation, decode_resources, encode_allocation

# --- policy ------------------------------------------------------------------------------


def encode_policy(policy: ClusterPolicy) -> Document:
    return {
        "teams": [_encode_team(team) for team in policy.teams],
        "prioritization": policy.prioritization.value,
        "queue_order": policy.queue_order.value,
        "priority_classes": [
            [cls.name, cls.weight, cls.time_limit_s] for cls in policy.priority_classes
        ],
        "default_priority_class": policy.default_priority_class,
        "idle_allocation": policy.idle_allocation.value,
        "idle_resource_sharing": policy.idle_resource_sharing,
        "preemption_grace_s": policy.preemption_grace_s,
        "cohorts": [_encode_cohort(cohort) for cohort in policy.cohorts],
        "starvation_guard_s": policy.starvation_guard_s,
        "fair_share_usage_half_life_s": policy.fair_share_usage_half_life_s,
    }


def decode_policy(data: Mapping[str, Any]) -> ClusterPolicy:
    return ClusterPolicy(
        teams=tuple(_decode_team(item) for item in data.get("teams", ())),
        prioritization=Prioritization(data.get("prioritization", Prioritization.PRIORITY.value)),
        queue_order=QueueOrder(data.get("queue_order", QueueOrder.SUBMISSION.value)),
        priority_classes=tuple(
            PriorityClass(name, int(weight), *limit)
            for name, weight, *limit in data.get("priority_classes", ())
        ),
        default_priority_class=data.get("default_priority_class"),
        idle_allocation=IdleAllocation(
            data.get("idle_allocation", IdleAllocation.FIRST_COME.value)
        ),
        idle_resource_sharing=bool(data.get("idle_resource_sharing", True)),
        preemption_grace_s=int(data.get("preemption_grace_s", DEFAULT_PREEMPTION_GRACE_S)),
        cohorts=tuple(_decode_cohort(item) for item in data.get("cohorts", ())),
        starvation_guard_s=float(data.get("starvation_guard_s", DEFAULT_STARVATION_GUARD_S)),
        fair_share_usage_half_life_s=float(
            data.get("fair_share_usage_half_life_s", DEFAULT_USAGE_HALF_LIFE_S)
        ),
    )


def _encode_cohort(cohort: CohortSpec) -> Document:
    return {
        "name": cohort.name,
        "parent": list(cohort.parent),
        "fair_share_weight": cohort.fair_share_weight,
        "quotas": [
            {
                "flavor": quota.flavor,
                "guarantee": dict(quota.guarantee),
                "borrow_limit": dict(quota.borrow_limit),
                "lending_limit": dict(quota.lending_limit),
                "borrow_limited": sorted(quota.borrow_limited),
                "lend_limited": sorted(quota.lend_limited),
                "covers": sorted(quota.covers),
            }
            for quota in cohort.quotas
        ],
    }


def _decode_cohort(data: Mapping[str, Any]) -> CohortSpec:
    return CohortSpec(
        name=data["name"],
        parent=tuple(data.get("parent", ())),
        fair_share_weight=int(data.get("fair_share_weight", 1)),
        quotas=tuple(
            CohortQuota(
                flavor=FlavorName(item["flavor"]),
                guarantee=decode_resources(item.get("guarantee", {})),
                borrow_limit=decode_resources(item.get("borrow_limit", {})),
                lending_limit=decode_resources(item.get("lending_limit", {})),
                borrow_limited=frozenset(item.get("borrow_limited", ())),
                lend_limited=frozenset(item.get("lend_limited", ())),
                covers=frozenset(item.get("covers", ())),
            )
            for item in data.get("quotas", ())
        ),
    )


def _encode_team(team: TeamSpec) -> Document:
    return {
        "name": team.name,
        "quotas": [_encode_quota(quota) for quota in team.quotas],
        "sharing": team.sharing.value,
        "fair_share_weight": team.fair_share_weight,
        "preempt_team_tasks": team.preempt_team_tasks.value,
        "cohort": list(team.cohort),
        "queueing": team.queueing.value,
        "active": team.active,
    }


def _decode_team(data: Mapping[str, Any]) -> TeamSpec:
    return TeamSpec(
        name=TeamName(data["name"]),
        quotas=tuple(_decode_quota(item) for item in data.get("quotas", ())),
        sharing=SharingStrategy(data.get("sharing", SharingStrategy.LEND_AND_BORROW.value)),
        fair_share_weight=int(data.get("fair_share_weight", 1)),
        preempt_team_tasks=PreemptTeamTasks(
            data.get("preempt_team_tasks", PreemptTeamTasks.LOWER_PRIORITY.value)
        ),
        cohort=tuple(data.get("cohort", ())),
        queueing=QueueingStrategy(data.get("queueing", QueueingStrategy.BEST_EFFORT_FIFO.value)),
        active=bool(data.get("active", True)),
    )


def _encode_quota(quota: FlavorQuota) -> Document:
    lending = quota.lending_limit
    return {
        "flavor": quota.flavor,
        "guarantee": dict(quota.guarantee),
        "borrow_limit": dict(quota.borrow_limit),
        "lending_limit": None if lending is None else dict(lending),
        "covers": sorted(quota.covers),
    }


def _decode_quota(data: Mapping[str, Any]) -> FlavorQuota:
    lending = data.get("lending_limit")
    return FlavorQuota(
        flavor=FlavorName(data["flavor"]),
        guarantee=decode_resources(data.get("guarantee", {})),
        borrow_limit=decode_resources(data.get("borrow_limit", {})),
        lending_limit=None if lending is None else decode_resources(lending),
        covers=frozenset(data.get("covers", ())),
    )


# --- decisions ---------------------------------------------------------------------------


def encode_admit(admit: Admit) -> Document:
    return {"job": admit.job, "allocation": encode_allocation(admit.allocation)}


def decode_admit(data: Mapping[str, Any]) -> Admit:
    return Admit(JobId(data["job"]), decode_allocation(data["allocation"]))


def encode_preempt(preempt: Preempt) -> Document:
    return {
        "victim": preempt.victim,
        "for_job": preempt.for_job,
        "cause": preempt.cause.value,
        "message": preempt.message,
    }


def decode_preempt(data: Mapping[str, Any]) -> Preempt:
    return Preempt(
        JobId(data["victim"]),
        JobId(data["for_job"]),
        PreemptionCause(data["cause"]),
        data.get("message", ""),
    )


def encode_requeue(requeue: Requeue) -> Document:
    return {"job": requeue.job, "cause": requeue.cause.value, "message": requeue.message}


def decode_requeue(data: Mapping[str, Any]) -> Requeue:
    return Requeue(JobId(data["job"]), RequeueCause(data["cause"]), data.get("message", ""))


def encode_cancel(cancel: Cancel) -> Document:
    return {"job": cancel.job, "message": cancel.message}


def decode_cancel(data: Mapping[str, Any]) -> Cancel:
    return Cancel(JobId(data["job"]), data.get("message", ""))


def encode_diagnostic(diagnostic: Diagnostic) -> Document:
    return {
        "job": diagnostic.job,
        "reason": diagnostic.reason.value,
        "message": diagnostic.message,
        "numbers": dict(diagnostic.numbers),
        "remedies": list(diagnostic.remedies),
    }


def decode_diagnostic(data: Mapping[str, Any]) -> Diagnostic:
    return Diagnostic(
        job=JobId(data["job"]),
        reason=PendingReason(data["reason"]),
        message=data.get("message", ""),
        numbers=dict(data.get("numbers", {})),
        remedies=tuple(data.get("remedies", ())),
    )
