"""Kueue's governance objects read back as a topoq policy (``topoq policy import --from
kueue``): the inverse of :mod:`topoq.discovery.kueue_policy` on what Kueue can say, and a
reading of any Kueue setup (ClusterQueues, Cohorts, ResourceFlavors, WorkloadPriorityClasses;
other kinds are skipped).

- a ClusterQueue is a team (its name): per flavor, the nominal quotas are its guarantee, the
  borrowing and lending limits its limits; it lends and borrows (LendAndBorrow) unless every
  borrowing limit is 0 (Lend) and every lending limit too (DontLend); LowerPriority within
  the queue preempts the team's own tasks; StrictFIFO, a fair-sharing weight and a held
  queue (``stopPolicy`` other than None) carry over;
- a Cohort is a cohort at the path its parents make; ``topoq`` (the cluster) and
  ``topoq-teams`` (the teams that name no cohort) as the export writes them are not cohorts
  of the policy, and a top-level cohort's ``lendingLimit: 0`` on nothing guaranteed is how
  the export keeps top-level cohorts from lending each other: no quota of its own;
- a ResourceFlavor's flavor is its instance-type node label's value (``ml.p5.48xlarge`` is
  flavor ``p5.48xlarge``), else its name;
- a WorkloadPriorityClass is a priority class weighted by its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from topoq.discovery.kueue_policy import KUEUE_GROUP, ROOT_COHORT, TEAMS_COHORT
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import normalize_flavor
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    PreemptTeamTasks,
    PriorityClass,
    QueueingStrategy,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.domain.quantity import parse_quantity
from topoq.domain.resources import Resources

KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass")


def policy_from_kueue(objects: Iterable[Mapping[str, Any]]) -> ClusterPolicy:
    """The policy the Kueue objects say (any order; kinds other than ``KINDS`` skipped)."""
    found: dict[str, list[Mapping[str, Any]]] = {kind: [] for kind in KINDS}
    for item in objects:
        if not isinstance(item, Mapping):
            continue
        kind, api = item.get("kind"), str(item.get("apiVersion", ""))
        if kind in found and api.startswith(f"{KUEUE_GROUP}/"):
            found[str(kind)].append(item)
    if not found["ClusterQueue"]:
        raise InvalidInputError(
            "no Kueue ClusterQueue among the objects read",
            hint="give the output of kubectl get clusterqueues,cohorts,resourceflavors,"
            "workloadpriorityclasses -o yaml, or what topoq policy export --to kueue wrote",
        )
    flavors = {_name(f): _flavor_of(f) for f in found["ResourceFlavor"]}
    cohorts = {_name(c): c for c in found["Cohort"]}
    paths = {name: _path(name, cohorts) for name in cohorts}
    teams = tuple(_team(queue, flavors, paths) for queue in found["ClusterQueue"])
    declared = tuple(
        _cohort(cohorts[name], path, flavors)
        for name, path in sorted(paths.items(), key=lambda item: (len(item[1]), item[1]))
        if path
    )
    classes = tuple(
        PriorityClass(_name(c), int(c.get("value", 0)))
        for c in sorted(found["WorkloadPriorityClass"], key=lambda c: -int(c.get("value", 0)))
    )
    return ClusterPolicy(teams=teams, priority_classes=classes, cohorts=declared)


def _name(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("name", ""))


def _spec(item: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = item.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _flavor_of(flavor: Mapping[str, Any]) -> FlavorName:
    value = (_spec(flavor).get("nodeLabels") or {}).get(INSTANCE_TYPE_LABEL)
    return normalize_flavor(str(value)) if value else FlavorName(_name(flavor))


def _parent(cohort: Mapping[str, Any]) -> str | None:
    spec = _spec(cohort)
    parent = spec.get("parentName", spec.get("parent"))
    return str(parent) if parent else None


def _path(name: str, cohorts: Mapping[str, Mapping[str, Any]]) -> CohortPath:
    """The cohort's path below the cluster (``()`` for the export's two own cohorts)."""
    path: list[str] = []
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current not in (ROOT_COHORT, TEAMS_COHORT):
        if current in seen:
            raise InvalidInputError(f"cohort {name} is its own ancestor", where=f"Cohort {name}")
        seen.add(current)
        path.insert(0, current)
        found = cohorts.get(current)
        current = _parent(found) if found is not None else None
    return tuple(path)


def _team(
    queue: Mapping[str, Any], flavors: Mapping[str, FlavorName], paths: Mapping[str, CohortPath]
) -> TeamSpec:
    spec = _spec(queue)
    cohort_name = spec.get("cohortName", spec.get("cohort"))
    cohort = paths.get(str(cohort_name), (str(cohort_name),)) if cohort_name else ()
    quotas = []
    borrows = lends = False
    for flavor, resources in _flavor_resources(spec, flavors, f"ClusterQueue {_name(queue)}"):
        guarantee, borrowing, lending = _amounts(resources)
        borrows |= any(v > 0 for v in borrowing.values()) or any(
            "borrowingLimit" not in r for r in resources
        )
        lends |= not lending or any(v > 0 for v in lending.values())
        quotas.append(
            FlavorQuota(
                flavor,
                Resources(guarantee),
                Resources(borrowing),
                Resources(lending) if lending else None,
                frozenset(guarantee),
            )
        )
    sharing = (
        SharingStrategy.LEND_AND_BORROW
        if borrows
        else SharingStrategy.LEND
        if lends
        else SharingStrategy.DONT_LEND
    )
    if sharing is SharingStrategy.DONT_LEND:  # its lending limits of 0 are what DontLend says
        quotas = [
            FlavorQuota(q.flavor, q.guarantee, q.borrow_limit, None, q.covers) for q in quotas
        ]
    preemption = spec.get("preemption") or {}
    weight = (spec.get("fairSharing") or {}).get("weight", 1)
    return TeamSpec(
        name=TeamName(_name(queue)),
        quotas=tuple(quotas),
        sharing=sharing,
        fair_share_weight=int(float(str(weight))),
        preempt_team_tasks=PreemptTeamTasks.LOWER_PRIORITY
        if preemption.get("withinClusterQueue", "Never") != "Never"
        else PreemptTeamTasks.NEVER,
        cohort=cohort,
        queueing=QueueingStrategy.STRICT_FIFO
        if spec.get("queueingStrategy") == "StrictFIFO"
        else QueueingStrategy.BEST_EFFORT_FIFO,
        active=spec.get("stopPolicy", "None") == "None",
    )


def _cohort(
    cohort: Mapping[str, Any], path: CohortPath, flavors: Mapping[str, FlavorName]
) -> CohortSpec:
    spec = _spec(cohort)
    quotas = []
    for flavor, resources in _flavor_resources(spec, flavors, f"Cohort {_name(cohort)}"):
        guarantee, borrowing, lending = _amounts(resources)
        if len(path) == 1 and not any(guarantee.values()) and not borrowing:
            continue  # the export's way of keeping a top-level cohort from lending
        quotas.append(
            CohortQuota(
                flavor,
                Resources(guarantee),
                Resources(borrowing),
                Resources(lending) if len(path) > 1 else Resources(),
                frozenset(borrowing),
                frozenset(lending) if len(path) > 1 else frozenset(),
                frozenset(guarantee),
            )
        )
    weight = (spec.get("fairSharing") or {}).get("weight", 1)
    return CohortSpec(path[-1], path[:-1], tuple(quotas), int(float(str(weight))))


def _flavor_resources(
    spec: Mapping[str, Any], flavors: Mapping[str, FlavorName], where: str
) -> list[tuple[FlavorName, list[Mapping[str, Any]]]]:
    found = []
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            name = str(flavor.get("name", ""))
            if name not in flavors:
                raise InvalidInputError(
                    f"names ResourceFlavor {name!r}, which is not among the objects read",
                    where=where,
                    hint="read the ResourceFlavors too",
                )
            found.append((flavors[name], list(flavor.get("resources") or ())))
    return found


def _amounts(
    resources: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    guarantee: dict[str, int] = {}
    borrowing: dict[str, int] = {}
    lending: dict[str, int] = {}
    for resource in resources:
        name = str(resource.get("name", ""))
        guarantee[name] = parse_quantity(name, resource.get("nominalQuota", 0))
        if "borrowingLimit" in resource:
            borrowing[name] = parse_quantity(name, resource["borrowingLimit"])
        if "lendingLimit" in resource:
            lending[name] = parse_quantity(name, resource["lendingLimit"])
    return guarantee, borrowing, lending
