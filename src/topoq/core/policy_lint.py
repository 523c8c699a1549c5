"""Lint a governance policy against a cluster: what cannot work, and what probably is not meant.

Errors: guarantees of a flavor that add up to more than the cluster has of it; a quota for a
flavor no node is; a team's typical gang that needs more than its guarantee plus borrow limit,
or that does not fit the topology even on an empty cluster (see :mod:`topoq.core.gang_lint`).
Warnings: a LendAndBorrow team that may borrow nothing, a team of weight 0 under fair share, a
team without a guarantee, a guarantee that leaves out a resource others' guarantees name,
borrow or lending limits its sharing strategy ignores, priority classes under FIFO, cohorts
without teams or with borrow limits that cannot bind (:mod:`topoq.core.cohort_lint`). Codes and
their meaning: :class:`topoq.domain.lint.LintCode`.

A node's flavor is its instance-type label with any ``ml.`` prefix dropped
(:func:`topoq.domain.flavors.flavor_of`). Capacity counts every node listed, ready or not: the
lint is about what the cluster has, not what is up now. Inactive teams hold no guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from topoq.core.cohort_lint import cohort_findings
from topoq.core.gang_lint import gang_findings
from topoq.domain.flavors import flavor_of
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    IdleAllocation,
    Prioritization,
    QueueOrder,
    TeamName,
    TeamSpec,
)
from topoq.domain.lint import (
    LintCode,
    LintFinding,
    LintSeverity,
    accelerators_first,
    readable_amount,
)
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import WorkloadSpec

__all__ = ["capacity_of_flavors", "lint_policy"]


def lint_policy(
    policy: ClusterPolicy,
    nodes: Sequence[NodeSpec],
    topology: TopologySpec,
    *,
    typical_gangs: Mapping[TeamName, WorkloadSpec] | None = None,
    flavor_label: str = INSTANCE_TYPE_LABEL,
) -> list[LintFinding]:
    """Every finding, errors first, each group in the order of the policy."""
    capacity = capacity_of_flavors(nodes, flavor_label)
    findings = _scheduling_findings(policy)
    findings += _flavor_findings(policy, capacity, flavor_label)
    for team in policy.teams:
        findings += _team_findings(policy, team)
    findings += cohort_findings(policy, capacity)
    if typical_gangs:
        findings += gang_findings(policy, nodes, topology, typical_gangs, flavor_label, capacity)
    return sorted(findings, key=lambda finding: not finding.is_error)


def capacity_of_flavors(nodes: Iterable[NodeSpec], label: str) -> dict[FlavorName, Resources]:
    """Allocatable per flavor, summed over the nodes (pod slots left out)."""
    totals: dict[FlavorName, Resources] = {}
    for node in nodes:
        flavor = flavor_of(node, label)
        allocatable = Resources({k: v for k, v in node.allocatable.items() if k != PODS})
        totals[flavor] = totals.get(flavor, Resources()) + allocatable
    return totals


def _scheduling_findings(policy: ClusterPolicy) -> list[LintFinding]:
    findings = []
    if policy.prioritization is Prioritization.FIFO and policy.priority_classes:
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.IGNORED_PRIORITY_CLASSES,
                f"{len(policy.priority_classes)} priority classes are defined, but "
                "prioritization is fifo, so they do not order work",
                "set prioritization: priority, or remove the priority classes",
            )
        )
    limited = any(cls.time_limit_s is not None for cls in policy.priority_classes)
    if policy.queue_order is QueueOrder.SHORTEST_FIRST and not limited:
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.SHORTEST_FIRST_WITHOUT_LIMITS,
                "queueOrder is shortest-first, but no priority class sets a time limit: only "
                "jobs that give their own limit are ordered by it, and they go before every "
                "job without one",
                "give the priority classes a timeLimit, or set queueOrder: submission",
            )
        )
    return findings


def _flavor_findings(
    policy: ClusterPolicy, capacity: Mapping[FlavorName, Resources], label: str
) -> list[LintFinding]:
    teams_of: dict[FlavorName, list[TeamSpec]] = {}
    for team in policy.teams:
        for quota in team.quotas:
            teams_of.setdefault(quota.flavor, []).append(team)
    findings: list[LintFinding] = []
    for flavor, teams in teams_of.items():
        if flavor not in capacity:
            findings.append(_missing_flavor(flavor, teams, capacity, label))
            continue
        active = [team for team in teams if team.active]
        owners = [(str(team.name), _guarantee(team, flavor)) for team in active]
        owners += [
            (f"cohort {'/'.join(cohort.path)}", cohort_quota.guarantee)
            for cohort in policy.cohorts
            if (cohort_quota := cohort.quota_for(flavor)) is not None
        ]
        overcommit = _overcommit(flavor, owners, capacity[flavor])
        if overcommit is not None:
            findings.append(overcommit)
        findings += _partial_guarantees(flavor, active)
    return findings


def _partial_guarantees(flavor: FlavorName, teams: Sequence[TeamSpec]) -> list[LintFinding]:
    named = {team.name: _covered(team, flavor) for team in teams}
    covered = set().union(*named.values())
    findings: list[LintFinding] = []
    for team in teams:
        missing = accelerators_first(covered - named[team.name])
        if not named[team.name] or not missing:
            continue
        others = ", ".join(name for name, names in named.items() if missing[0] in names)
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.PARTIAL_GUARANTEE,
                f"team {team.name}'s guarantee of {flavor} has no {', '.join(missing)}, which "
                f"the guarantees of {others} name: the team's jobs can use it only by borrowing",
                f"add {', '.join(missing)} to the team's {flavor} quota (whole instances "
                "include every resource)",
            )
        )
    return findings


def _covered(team: TeamSpec, flavor: FlavorName) -> set[str]:
    quota = team.quota_for(flavor)
    return set(quota.covers) if quota is not None else set()


def _guarantee(team: TeamSpec, flavor: FlavorName) -> Resources:
    quota = team.quota_for(flavor)
    return quota.guarantee if quota is not None else Resources()


def _missing_flavor(
    flavor: FlavorName,
    teams: Sequence[TeamSpec],
    capacity: Mapping[FlavorName, Resources],
    label: str,
) -> LintFinding:
    names = ", ".join(team.name for team in teams)
    known = ", ".join(sorted(capacity)) or "none"
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.FLAVOR_NOT_IN_CLUSTER,
        f"flavor {flavor} (quota of {names}) is not in the cluster: no node has {label}={flavor}",
        f"the cluster's flavors are {known}; correct the flavor name or remove the quota",
    )


def _overcommit(
    flavor: FlavorName, owners: Sequence[tuple[str, Resources]], capacity: Resources
) -> LintFinding | None:
    """Teams' and cohorts' guarantees (``owners``: a name and a guarantee) above capacity."""
    guaranteed = Resources()
    for _, owned in owners:
        guaranteed = guaranteed + owned
    over = [
        name for name in accelerators_first(guaranteed) if guaranteed[name] > capacity.amount(name)
    ]
    if not over:
        return None
    lead = over[0]
    shares = ", ".join(
        f"{name} {readable_amount(lead, owned.amount(lead))}"
        for name, owned in owners
        if owned.amount(lead)
    )
    sums = "; ".join(
        f"{readable_amount(name, guaranteed[name])} guaranteed, "
        f"the cluster has {readable_amount(name, capacity.amount(name))}"
        for name in over
    )
    excess = readable_amount(lead, guaranteed[lead] - capacity.amount(lead))
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.GUARANTEES_EXCEED_CAPACITY,
        f"guarantees of {flavor} add up to more than the cluster has: {sums} ({shares})",
        f"lower the guarantees by at least {excess}, or add {flavor} nodes",
    )


def _team_findings(policy: ClusterPolicy, team: TeamSpec) -> list[LintFinding]:
    findings: list[LintFinding] = []
    guaranteed = any(quota.guarantee for quota in team.quotas)
    may_borrow = team.sharing.borrows and any(quota.borrow_limit for quota in team.quotas)
    if not guaranteed:
        findings.append(_no_quota(team, may_borrow))
    elif team.sharing.borrows and not may_borrow:
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.ZERO_BORROW_LIMIT,
                f"team {team.name} is LendAndBorrow but its borrow limit is 0 in every flavor, "
                "so it never borrows",
                "raise borrowLimitPercent or give absoluteBorrowLimits, or make the team Lend",
            )
        )
    fair_share = policy.idle_allocation is IdleAllocation.FAIR_SHARE
    if fair_share and team.sharing.borrows and team.fair_share_weight == 0:
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.ZERO_FAIR_SHARE_WEIGHT,
                f"team {team.name} has fair-share weight 0: under fair-share it gets idle "
                "capacity only when no other team wants it, and yields it first",
                "give the team a weight from 1 to 100 (HyperPod's FairShareWeight defaults to 0)",
            )
        )
    return findings + _ignored_limits(team)


def _no_quota(team: TeamSpec, may_borrow: bool) -> LintFinding:
    if may_borrow:
        consequence = (
            "it runs only on borrowed capacity, and its jobs are the first reclaimed when "
            "lenders want their guarantee back"
        )
    else:
        consequence = "and it may borrow nothing, so none of its jobs can ever be admitted"
    return LintFinding(
        LintSeverity.WARNING,
        LintCode.NO_QUOTA,
        f"team {team.name} has no guarantee in any flavor: {consequence}",
        "give the team a quota (instances, accelerators or resources of a flavor)",
    )


def _ignored_limits(team: TeamSpec) -> list[LintFinding]:
    findings: list[LintFinding] = []
    if not team.sharing.borrows and any(quota.borrow_limit for quota in team.quotas):
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.IGNORED_BORROW_LIMIT,
                f"team {team.name} is {team.sharing.value}, which never borrows, so its borrow "
                "limits are ignored",
                "make the team LendAndBorrow, or remove its absolute borrow limits",
            )
        )
    if not team.sharing.lends and any(q.lending_limit is not None for q in team.quotas):
        findings.append(
            LintFinding(
                LintSeverity.WARNING,
                LintCode.IGNORED_LENDING_LIMIT,
                f"team {team.name} is DontLend, so its lending limits are ignored",
                "make the team Lend or LendAndBorrow, or remove its lending limits",
            )
        )
    return findings
