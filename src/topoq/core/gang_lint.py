"""Lint a team's typical gang against the policy and the cluster: can it ever run?

A gang is admitted within one flavor (the one its pod sets select with the flavor label, else
any flavor, the team's own first). It can ever run when, in some such flavor,

1. its total requests of the resources quotas cover there fit the team's guarantee plus borrow
   limit (the guarantee alone for a team that does not borrow), and
2. it is placed on that flavor's nodes while the whole cluster is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement
from topoq.core.priority_classes import policy_class_of
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import flavor_of, normalize_flavor
from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName, TeamSpec
from topoq.domain.lint import (
    LintCode,
    LintFinding,
    LintSeverity,
    accelerators_first,
    readable_amount,
)
from topoq.domain.node import NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import WorkloadSpec


@dataclass
class FlavorTrees:
    """The topology tree of each flavor's nodes, built when first needed."""

    nodes: Sequence[NodeSpec]
    topology: TopologySpec
    label: str
    _trees: dict[FlavorName, TopologyTree] = field(default_factory=dict)

    def tree(self, flavor: FlavorName) -> TopologyTree:
        if flavor not in self._trees:
            members = [node for node in self.nodes if flavor_of(node, self.label) == flavor]
            self._trees[flavor] = build_tree(members, self.topology)
        return self._trees[flavor]


@dataclass(frozen=True)
class _Gang:
    team: TeamSpec
    workload: WorkloadSpec
    flavors: tuple[FlavorName, ...]
    """The flavors it may be admitted in, the team's own first."""

    @property
    def title(self) -> str:
        return f"team {self.team.name}'s typical gang {self.workload.name!r}"


def gang_findings(
    policy: ClusterPolicy,
    nodes: Sequence[NodeSpec],
    topology: TopologySpec,
    gangs: Mapping[TeamName, WorkloadSpec],
    label: str,
    capacity: Mapping[FlavorName, Resources],
) -> list[LintFinding]:
    trees = FlavorTrees(nodes, topology, label)
    findings: list[LintFinding] = []
    for team_name, workload in gangs.items():
        team = policy.by_team.get(team_name)
        if team is None:
            findings.append(_unknown_team(team_name, policy))
            continue
        findings += _priority_class_findings(policy, team, workload)
        gang = _Gang(team, workload, _flavors_for(team, workload, label, capacity))
        in_quota = [flavor for flavor in gang.flavors if _fits_quota(policy, gang, flavor)]
        if gang.flavors and not in_quota and team.active:
            findings.append(_over_quota(policy, gang))
        findings += _placement_findings(gang, in_quota or list(gang.flavors), trees, label)
    return findings


def _unknown_team(team: TeamName, policy: ClusterPolicy) -> LintFinding:
    known = ", ".join(spec.name for spec in policy.teams) or "none"
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.GANG_UNKNOWN_TEAM,
        f"a typical gang is given for team {team}, which the policy does not define",
        f"use one of the policy's teams: {known}",
    )


def _priority_class_findings(
    policy: ClusterPolicy, team: TeamSpec, workload: WorkloadSpec
) -> list[LintFinding]:
    """A class the policy does not define, by the rule submission charges jobs by
    (``policy_class_of``: HyperPod's ``training-priority`` is the policy's ``training``)."""
    name = workload.priority_class
    if name is None or policy_class_of(name, policy) is not None:
        return []
    defined = ", ".join(cls.name for cls in policy.priority_classes) or "none"
    return [
        LintFinding(
            LintSeverity.ERROR,
            LintCode.UNKNOWN_PRIORITY_CLASS,
            f"team {team.name}'s typical gang {workload.name!r} has priority class {name!r}, "
            "which the policy does not define",
            f"use a class the policy defines ({defined}), or define {name}",
        )
    ]


def _flavors_for(
    team: TeamSpec, workload: WorkloadSpec, label: str, capacity: Mapping[FlavorName, Resources]
) -> tuple[FlavorName, ...]:
    selected = {
        normalize_flavor(pod_set.node_selector[label])
        for pod_set in workload.pod_sets
        if label in pod_set.node_selector
    }
    if selected:
        return tuple(sorted(selected)) if len(selected) == 1 and selected <= set(capacity) else ()
    own = sorted(quota.flavor for quota in team.quotas if quota.flavor in capacity)
    return (*own, *sorted(flavor for flavor in capacity if flavor not in own))


def demand_of(workload: WorkloadSpec) -> Resources:
    """The gang's requests summed over its pods (pod slots left out)."""
    total = Resources()
    for pod_set in workload.pod_sets:
        total = total + pod_set.requests.scaled(pod_set.count)
    return Resources({name: amount for name, amount in total.items() if name != PODS})


def _room(policy: ClusterPolicy, team: TeamSpec, flavor: FlavorName) -> tuple[Resources, set[str]]:
    """The most the team may hold of the flavor, and the resources quotas cover there."""
    covered = {
        name
        for other in policy.teams
        if (quota := other.quota_for(flavor)) is not None
        for name in quota.covers
    }
    quota = team.quota_for(flavor)
    if quota is None:
        return Resources(), covered
    borrow = quota.borrow_limit if team.sharing.borrows else Resources()
    return quota.guarantee + borrow, covered


def _fits_quota(policy: ClusterPolicy, gang: _Gang, flavor: FlavorName) -> bool:
    room, covered = _room(policy, gang.team, flavor)
    demand = demand_of(gang.workload)
    return all(demand[name] <= room.amount(name) for name in demand if name in covered)


def _over_quota(policy: ClusterPolicy, gang: _Gang) -> LintFinding:
    flavor = gang.flavors[0]
    room, covered = _room(policy, gang.team, flavor)
    demand = demand_of(gang.workload)
    short = [name for name in accelerators_first(demand) if name in covered]
    lead = next(name for name in short if demand[name] > room.amount(name))
    quota = gang.team.quota_for(flavor)
    guarantee = quota.guarantee.amount(lead) if quota is not None else 0
    borrow = room.amount(lead) - guarantee
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.GANG_EXCEEDS_QUOTA,
        f"{gang.title} needs {readable_amount(lead, demand[lead])} of {flavor}, but the team "
        f"may hold at most {readable_amount(lead, room.amount(lead))} "
        f"({guarantee} guaranteed + {borrow} borrowed), in this or any other flavor",
        f"raise the team's guarantee or borrow limit of {flavor}, or make the gang smaller",
    )


def _placement_findings(
    gang: _Gang, flavors: Sequence[FlavorName], trees: FlavorTrees, label: str
) -> list[LintFinding]:
    if not flavors:
        return [_no_flavor(gang, label)]
    results: list[tuple[FlavorName, PlacementResult]] = []
    for flavor in flavors:
        try:
            result = find_placement(CapacityLedger.empty_cluster(trees.tree(flavor)), gang.workload)
        except InvalidInputError as error:
            return [
                LintFinding(
                    LintSeverity.ERROR,
                    LintCode.GANG_INVALID,
                    f"{gang.title} cannot be evaluated: {error}",
                    "fix the gang's topology request or the topology's levels",
                )
            ]
        if result.admitted:
            return []
        results.append((flavor, result))
    return [_never_places(gang, *results[0])]


def _never_places(gang: _Gang, flavor: FlavorName, result: PlacementResult) -> LintFinding:
    diagnosis = next(o.diagnosis for o in result.pod_sets if o.diagnosis is not None)
    hint = diagnosis.relaxations[0] if diagnosis.relaxations else "request fewer or smaller pods"
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.GANG_NEVER_PLACES,
        f"{gang.title} does not fit {flavor} even when the cluster is empty: {diagnosis.message}",
        hint,
    )


def _no_flavor(gang: _Gang, label: str) -> LintFinding:
    selected = sorted(
        {ps.node_selector[label] for ps in gang.workload.pod_sets if label in ps.node_selector}
    )
    if not selected:
        problem = "the cluster has no nodes"
    elif len(selected) > 1:
        problem = f"its pod sets select {label} {', '.join(selected)}; a gang runs in one flavor"
    else:
        problem = f"it selects {label}={selected[0]}, and the cluster has no such node"
    return LintFinding(
        LintSeverity.ERROR,
        LintCode.GANG_NEVER_PLACES,
        f"{gang.title} can never be placed: {problem}",
        "select one flavor the cluster has, or drop the selector",
    )
