"""A submission as a job: read the document in its format, then check it against the cluster
and the policy (team, priority class, topology levels) so that a job that could never be
scheduled is refused with the field to fix, not left pending forever."""

from __future__ import annotations

import re
from collections.abc import Iterable

from topoq.discovery.hyperpod_job import workload_from_hyperpod_job
from topoq.discovery.jobfile import workload_from_job_file
from topoq.discovery.kubernetes_workload import workload_from_kueue
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import Dependency, JobId, JobSpec
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import WorkloadSpec
from topoq.wire.v1 import JobFormat, SubmitJobRequest

DOCUMENT = "document"
_READERS = {
    JobFormat.TOPOQ: workload_from_job_file,
    JobFormat.HYPERPOD: workload_from_hyperpod_job,
    JobFormat.KUEUE: workload_from_kueue,
}
_HYPERPOD_NAMESPACE = re.compile(r"^hyperpod-ns-(?P<team>.+?)(?:-localqueue)?$")
_HYPERPOD_MAX_RETRY = "max_retry"
MAX_PODS_PER_JOB = 100_000
MAX_AMOUNT = 2**62


def job_from_request(
    request: SubmitJobRequest,
    *,
    policy: ClusterPolicy | None,
    topology: TopologySpec,
    user: str,
    now: float,
) -> JobSpec:
    """The job a submission asks for; ``InvalidInputError`` names the field to fix."""
    workload = read_workload(request)
    team = team_of(request, workload)
    check_team(team, policy)
    priority_class = request.priority_class or workload.priority_class
    check_priority_class(priority_class, policy, overridden=request.priority_class is not None)
    check_levels(workload, topology)
    check_sizes(workload)
    return JobSpec(
        id=JobId(request.id or workload.name),
        team=TeamName(team),
        workload=workload,
        submitted_at=now,
        priority_class=priority_class,
        dependencies=tuple(Dependency(d.kind, JobId(d.job)) for d in request.dependencies),
        max_retry=_max_retry(request),
        user=user,
    )


def read_workload(request: SubmitJobRequest) -> WorkloadSpec:
    """The document read by its format's reader; errors point into ``document``."""
    try:
        return _READERS[request.format](request.document, source=DOCUMENT)
    except InvalidInputError as error:
        where = error.where or DOCUMENT
        if where.startswith(f"{DOCUMENT}: "):
            where = f"{DOCUMENT}.{where.removeprefix(f'{DOCUMENT}: ')}"
        hint = error.hint or f"the document is read as format {request.format.value!r}"
        raise InvalidInputError(error.message, where=where, hint=hint) from None


def team_of(request: SubmitJobRequest, workload: WorkloadSpec) -> str:
    """The request's team, else the one HyperPod's namespace or queue name carries, else the
    namespace."""
    if request.team:
        return request.team
    for name in (workload.namespace, workload.queue or ""):
        match = _HYPERPOD_NAMESPACE.match(name)
        if match:
            return match["team"]
    if workload.namespace and workload.namespace != "default":
        return workload.namespace
    raise InvalidInputError(
        "no team is given",
        where="team",
        hint="give team, or a namespace hyperpod-ns-<team> in the document",
    )


def check_team(team: str, policy: ClusterPolicy | None) -> None:
    if policy is None or not policy.teams:
        raise InvalidInputError(
            "the cluster has no teams yet",
            where="team",
            hint="an admin sets a policy with teams first (PUT /api/v1/policy)",
        )
    if TeamName(team) not in policy.by_team:
        raise InvalidInputError(
            f"team {team!r} is not in the policy",
            where="team",
            hint=f"use one of: {_listed(t.name for t in policy.teams)}",
        )


def check_priority_class(
    name: str | None, policy: ClusterPolicy | None, *, overridden: bool
) -> None:
    if name is None or (policy is not None and name in policy.weight_of_class):
        return
    where = "priorityClass" if overridden else f"{DOCUMENT} (its priority class)"
    known = [cls.name for cls in policy.priority_classes] if policy is not None else []
    raise InvalidInputError(
        f"priority class {name!r} is not defined",
        where=where,
        hint=f"use one of: {_listed(known)}"
        if known
        else "the policy defines no priority classes; leave it out",
    )


def check_levels(workload: WorkloadSpec, topology: TopologySpec) -> None:
    """Every level a pod set names must be a level of the cluster."""
    for index, pod_set in enumerate(workload.pod_sets):
        for level in pod_set.topology.named_levels:
            if level not in topology.levels:
                raise InvalidInputError(
                    f"level {level!r} is not a level of the cluster",
                    where=f"{DOCUMENT} (pod set {index}, {pod_set.name!r})",
                    hint=f"the cluster's levels are: {_listed(topology.levels)}",
                )


def check_sizes(workload: WorkloadSpec) -> None:
    """Pod counts and amounts a cluster can hold at all (the cycle counts in 64-bit integers)."""
    if workload.total_pods > MAX_PODS_PER_JOB:
        raise InvalidInputError(
            f"the job has {workload.total_pods} pods",
            where=f"{DOCUMENT} (pod counts)",
            hint=f"a job has at most {MAX_PODS_PER_JOB} pods",
        )
    for index, pod_set in enumerate(workload.pod_sets):
        for name, amount in pod_set.requests.items():
            if amount * pod_set.count > MAX_AMOUNT:
                raise InvalidInputError(
                    f"{pod_set.count} pods of {name} {pod_set.requests.formatted()[name]} is "
                    "more than any cluster has",
                    where=f"{DOCUMENT} (pod set {index}, {pod_set.name!r}, requests)",
                    hint="check the quantity's unit (e.g. 1Ti, not 1e30)",
                )


def _max_retry(request: SubmitJobRequest) -> int:
    if request.max_retry is not None:
        return request.max_retry
    if request.format is not JobFormat.HYPERPOD:
        return 0
    value = request.document.get(_HYPERPOD_MAX_RETRY, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(
            f"expected a whole number >= 0, got {value!r}",
            where=f"{DOCUMENT}.{_HYPERPOD_MAX_RETRY}",
            hint="how often a failed job is restarted",
        )
    return value


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
