"""A topoq policy as the Kueue objects that govern the same way (``topoq policy export --to
kueue``), in ``kueue.x-k8s.io/v1beta2`` (``v1beta1`` on request):

- a **ResourceFlavor** per flavor the teams have quota for: the nodes whose flavor label
  (``node.kubernetes.io/instance-type`` by default) says so, with the **Topology** of the
  cluster's levels;
- the **Cohort** tree: a root ``topoq`` (the cluster: it holds the capacity no team or cohort
  is guaranteed, when the cluster is known), under it each top-level cohort (and
  ``topoq-teams`` for the teams without one), lending nothing upwards — top-level cohorts
  share idle capacity, never each other's quota, as in topoq — then the nested cohorts with
  their guarantees and limits; each with its fair-share weight;
- a **ClusterQueue** per team in its cohort: a resource group per set of covered resources,
  each flavor's nominal quota (the guarantee), borrowing limit (0 for teams that never
  borrow) and lending limit (0 for DontLend); preemption within the queue of lower priority
  work (when the team preempts its own tasks), reclaim of lent quota from any borrower, the
  team's fair-share weight and queueing strategy; an inactive team's queue is held;
- a **LocalQueue** per team in its namespace (``{team}`` by default, as the Kubernetes
  executor's), named after the team, and that Namespace;
- a **WorkloadPriorityClass** per priority class (its weight is the value).

Names are the policy's made DNS labels (a hash is appended when that changed one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from topoq.discovery.kubernetes import kueue_topology_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import flavor_of
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    FlavorQuota,
    PreemptTeamTasks,
    QueueingStrategy,
    SharingStrategy,
    TeamSpec,
)
from topoq.domain.kube_names import kube_name
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.quantity import format_quantity
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
ROOT_COHORT = "topoq"
TEAMS_COHORT = "topoq-teams"
"""The cohort of the teams that name none (topoq's unnamed top-level cohort)."""


def kueue_objects(
    policy: ClusterPolicy,
    topology: TopologySpec,
    *,
    idle: Mapping[str, Resources] | None = None,
    flavor_label: str = INSTANCE_TYPE_LABEL,
    namespace_pattern: str = "{team}",
    version: str = "v1beta2",
    label_values: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The objects, in an order ``kubectl apply`` takes them (what others refer to first).
    ``idle``: per flavor, the capacity no team or cohort is guaranteed (the root cohort's
    quota); unknown without the cluster. ``label_values``: per flavor, the value its nodes'
    flavor label has (``ml.p5.48xlarge`` for flavor ``p5.48xlarge``, say; default: the
    flavor's name)."""
    if version not in KUEUE_VERSIONS:
        raise InvalidInputError(
            f"Kueue API version {version!r}",
            where="--api-version",
            hint=f"use {' or '.join(KUEUE_VERSIONS)}",
        )
    api = f"{KUEUE_GROUP}/{version}"
    topology_name = kube_name(topology.name)
    flavors = sorted({quota.flavor for team in policy.teams for quota in team.quotas})
    objects: list[dict[str, Any]] = [
        {**kueue_topology_document(topology, api_version=api), "metadata": {"name": topology_name}}
    ]
    objects += [
        _object(
            api,
            "ResourceFlavor",
            kube_name(flavor, dots=True),
            spec={
                "nodeLabels": {flavor_label: (label_values or {}).get(flavor, flavor)},
                "topologyName": topology_name,
            },
        )
        for flavor in flavors
    ]
    objects += [
        _object(api, "WorkloadPriorityClass", kube_name(c.name), value=c.weight)
        for c in policy.priority_classes
    ]
    names = _cohort_names(policy)
    objects += _cohorts(api, policy, names, idle or {}, version)
    for team in policy.teams:
        objects.append(_cluster_queue(api, team, names, version))
    for team in policy.teams:
        namespace = namespace_pattern.format(team=kube_name(team.name))
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        objects.append(
            _object(
                api,
                "LocalQueue",
                kube_name(team.name),
                namespace=namespace,
                spec={"clusterQueue": kube_name(team.name)},
            )
        )
    return objects


def cluster_figures(
    policy: ClusterPolicy, nodes: Iterable[NodeSpec]
) -> tuple[dict[str, Resources], dict[str, str]]:
    """What ``kueue_objects`` takes from the cluster: per flavor the teams cover, the capacity
    no team or cohort is guaranteed (of the covered resources; never below 0), and the value
    its nodes' instance-type label has."""
    capacity: dict[str, Resources] = {}
    label_values: dict[str, str] = {}
    for node in nodes:
        flavor = flavor_of(node)
        label_values.setdefault(flavor, node.labels.get(INSTANCE_TYPE_LABEL, flavor))
        capacity[flavor] = capacity.get(flavor, Resources()) + node.allocatable
    quotas: list[FlavorQuota | CohortQuota] = [q for t in policy.teams for q in t.quotas]
    quotas += [q for c in policy.cohorts for q in c.quotas]
    guaranteed: dict[str, Resources] = {}
    for quota in quotas:
        guaranteed[quota.flavor] = guaranteed.get(quota.flavor, Resources()) + quota.guarantee
    covered = _covered_by_flavor(policy)
    idle = {
        flavor: Resources(
            {
                name: max(0, amount - guaranteed.get(flavor, Resources()).amount(name))
                for name, amount in total.items()
                if name in covered[flavor]
            }
        )
        for flavor, total in capacity.items()
        if flavor in covered
    }
    return idle, label_values


def _object(
    api: str, kind: str, name: str, *, namespace: str | None = None, **fields: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "topoq"}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **fields}


def _cohort_names(policy: ClusterPolicy) -> dict[CohortPath, str]:
    """Each cohort path's Kueue name: the cohort's own (a policy gives a name one place in
    its tree), as a DNS label."""
    paths = {cohort.path for cohort in policy.cohorts} | {
        t.cohort for t in policy.teams if t.cohort
    }
    for path in list(paths):
        paths |= {path[:end] for end in range(1, len(path))}
    last = [path[-1] for path in paths]
    names = {
        path: kube_name(path[-1] if last.count(path[-1]) == 1 else "-".join(path)) for path in paths
    }
    if any(not team.cohort for team in policy.teams):
        names[()] = TEAMS_COHORT
    return names


def _cohorts(
    api: str,
    policy: ClusterPolicy,
    names: Mapping[CohortPath, str],
    idle: Mapping[str, Resources],
    version: str,
) -> list[dict[str, Any]]:
    parent_key = "parentName" if version == "v1beta2" else "parent"
    root_spec: dict[str, Any] = {"fairSharing": {"weight": 1}}  # never empty: see below
    groups = _groups(
        (flavor, amounts, {}, frozenset(amounts)) for flavor, amounts in sorted(idle.items())
    )
    if groups:
        root_spec["resourceGroups"] = groups
    # (a server-side apply that drops the root's idle quota would otherwise leave its spec
    # null, which Kueue refuses)
    found = [_object(api, "Cohort", ROOT_COHORT, spec=root_spec)]
    specs = {cohort.path: cohort for cohort in policy.cohorts}
    covered = _covered_by_flavor(policy)
    for path in sorted(names, key=lambda p: (len(p), p)):
        spec: dict[str, Any] = {}
        cohort = specs.get(path)
        parent = names[path[:-1]] if len(path) > 1 else ROOT_COHORT
        spec[parent_key] = parent
        if cohort is not None and cohort.fair_share_weight != 1:
            spec["fairSharing"] = {"weight": cohort.fair_share_weight}
        quotas: dict[str, CohortQuota] = (
            {quota.flavor: quota for quota in cohort.quotas} if cohort else {}
        )
        entries = []
        for flavor in sorted(set(quotas) | (set(covered) if len(path) <= 1 else set())):
            quota = quotas.get(flavor)
            resources = covered.get(flavor, frozenset()) | (quota.covers if quota else frozenset())
            limits = _cohort_limits(quota, resources, top=len(path) <= 1)
            entries.append((flavor, quota.guarantee if quota else Resources(), limits, resources))
        groups = _groups(entries)
        if groups:
            spec["resourceGroups"] = groups
        found.append(_object(api, "Cohort", names[path], spec=spec))
    return found


def _cohort_limits(
    quota: CohortQuota | None, resources: Iterable[str], *, top: bool
) -> dict[str, dict[str, int]]:
    """Per resource, the limits Kueue is told: a top-level cohort lends nothing upwards."""
    limits: dict[str, dict[str, int]] = {}
    for name in resources:
        limit: dict[str, int] = {}
        if quota is not None and name in quota.borrow_limited:
            limit["borrowingLimit"] = quota.borrow_limit.amount(name)
        if top:
            limit["lendingLimit"] = 0
        elif quota is not None and name in quota.lend_limited:
            limit["lendingLimit"] = quota.lending_limit.amount(name)
        limits[name] = limit
    return limits


def _covered_by_flavor(policy: ClusterPolicy) -> dict[str, frozenset[str]]:
    covered: dict[str, set[str]] = {}
    for team in policy.teams:
        for quota in team.quotas:
            covered.setdefault(quota.flavor, set()).update(quota.covers)
    return {flavor: frozenset(names) for flavor, names in covered.items()}


def _cluster_queue(
    api: str, team: TeamSpec, names: Mapping[CohortPath, str], version: str
) -> dict[str, Any]:
    entries = [
        (quota.flavor, quota.guarantee, _team_limits(team, quota), quota.covers)
        for quota in team.quotas
    ]
    spec: dict[str, Any] = {
        ("cohortName" if version == "v1beta2" else "cohort"): names[team.cohort],
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO"
        if team.queueing is QueueingStrategy.STRICT_FIFO
        else "BestEffortFIFO",
        "preemption": {
            "withinClusterQueue": "LowerPriority"
            if team.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY
            else "Never",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
        },
        "resourceGroups": _groups(entries),
    }
    if team.fair_share_weight != 1:
        spec["fairSharing"] = {"weight": team.fair_share_weight}
    if not team.active:
        spec["stopPolicy"] = "Hold"
    return _object(api, "ClusterQueue", kube_name(team.name), spec=spec)


def _team_limits(team: TeamSpec, quota: FlavorQuota) -> dict[str, dict[str, int]]:
    limits: dict[str, dict[str, int]] = {}
    for name in quota.covers:
        limit = {
            "borrowingLimit": quota.borrow_limit.amount(name)
            if team.sharing is SharingStrategy.LEND_AND_BORROW
            else 0
        }
        if team.sharing is SharingStrategy.DONT_LEND:
            limit["lendingLimit"] = 0
        elif quota.lending_limit is not None:
            limit["lendingLimit"] = quota.lending_limit.amount(name)
        limits[name] = limit
    return limits


GroupEntry = tuple[str, Resources, Mapping[str, Mapping[str, int]], frozenset[str]]
"""A flavor, its nominal amounts, its limits per resource, and the resources it covers."""


def _groups(entries: Iterable[GroupEntry]) -> list[dict[str, Any]]:
    """Kueue's resource groups: the flavors that cover the same resources together (a flavor
    is in one group; every flavor of a group lists every covered resource)."""
    by_cover: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for flavor, amounts, limits, covers in entries:
        names = tuple(sorted(set(covers) | set(limits)))
        if not names:
            continue
        resources = []
        for name in names:
            resource: dict[str, Any] = {
                "name": name,
                "nominalQuota": format_quantity(name, amounts.amount(name)),
            }
            for key, value in limits.get(name, {}).items():
                resource[key] = format_quantity(name, value)
            resources.append(resource)
        by_cover.setdefault(names, []).append(
            {"name": kube_name(flavor, dots=True), "resources": resources}
        )
    return [
        {"coveredResources": list(names), "flavors": flavors}
        for names, flavors in sorted(by_cover.items())
    ]
