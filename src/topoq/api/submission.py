"""A submission as a job: read the document in its format, then check it against the cluster
and the policy (team, priority class, topology levels, the largest node) so that a job that
could never be scheduled is refused with the field to fix, not left pending forever; and check
every field that becomes a name, a path, a process or an environment (ids, the team, pod-set
names, commands, environment variables) so that no admitted gang fails to start on them."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from topoq.api.errors import UNREADABLE_INPUT
from topoq.discovery.hyperpod_job import HYPERPOD_JOB_NAME_FIELD, workload_from_hyperpod_job
from topoq.discovery.jobfile import workload_from_job_file
from topoq.discovery.kubernetes_workload import workload_from_kueue
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import Dependency, JobId, JobSpec
from topoq.domain.launch import (
    check_command,
    check_environment,
    check_launch_size,
)
from topoq.domain.names import check_job_id, check_label_name
from topoq.domain.quantity import PODS, format_quantity
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec, WorkloadSpec
from topoq.wire.v1 import JobFormat, SubmitJobRequest
from topoq.wire.v1.jobs import MAX_RETRY_LIMIT

log = logging.getLogger(__name__)

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
_NAME_FIELD = {
    JobFormat.TOPOQ: f"{DOCUMENT}.metadata.name",
    JobFormat.HYPERPOD: f"{DOCUMENT}.{HYPERPOD_JOB_NAME_FIELD}",
    JobFormat.KUEUE: f"{DOCUMENT}.metadata.name",
}
_KUEUE_CONTAINER = "template.spec.containers (the main container)"
_POD_SET_FIELDS = {
    JobFormat.TOPOQ: {"environment": "environment", "command": "command", "requests": "requests"},
    JobFormat.HYPERPOD: {
        "environment": "environment",
        "command": "command",
        "requests": "(its instance type, accelerators and requests)",
    },
    JobFormat.KUEUE: {
        "environment": f"{_KUEUE_CONTAINER}.env",
        "command": f"{_KUEUE_CONTAINER}.command",
        "requests": f"{_KUEUE_CONTAINER}.resources",
    },
}
"""Where each checked field of a pod set is written, in each format."""


def job_from_request(
    request: SubmitJobRequest,
    *,
    policy: ClusterPolicy | None,
    topology: TopologySpec,
    largest_node: Mapping[str, int],
    user: str,
    now: float,
) -> JobSpec:
    """The job a submission asks for; ``InvalidInputError`` names the field to fix.
    ``largest_node`` is the most of each resource one node of the cluster has."""
    workload = read_workload(request)
    job_id = job_id_of(request, workload)
    dependencies = tuple(
        Dependency(d.kind, JobId(check_job_id(d.job, where=f"dependencies[{i}].job")))
        for i, d in enumerate(request.dependencies)
    )
    team = check_label_name(team_of(request, workload), what="team name", where="team")
    check_team(team, policy)
    priority_class = request.priority_class or workload.priority_class
    check_priority_class(priority_class, policy, overridden=request.priority_class is not None)
    check_levels(workload, topology)
    check_sizes(workload)
    for index, pod_set in enumerate(workload.pod_sets):
        fields = PodSetFields(request.format, index)
        check_launch_fields(pod_set, fields)
        check_requests(pod_set, largest_node, where=fields.path("requests"))
    return JobSpec(
        id=job_id,
        team=TeamName(team),
        workload=workload,
        submitted_at=now,
        priority_class=priority_class,
        dependencies=dependencies,
        max_retry=_max_retry(request),
        user=user,
        time_limit_s=request.time_limit_s or workload.time_limit_s,
    )


def job_id_of(request: SubmitJobRequest, workload: WorkloadSpec) -> JobId:
    """The request's id, else the document's name: either in the job id grammar."""
    if request.id is not None:
        return JobId(check_job_id(request.id, where="id"))
    return JobId(check_job_id(workload.name, where=_NAME_FIELD[request.format]))


def read_workload(request: SubmitJobRequest) -> WorkloadSpec:
    """The document read by its format's reader; errors point into ``document``."""
    try:
        return _READERS[request.format](request.document, source=DOCUMENT)
    except UNREADABLE_INPUT as error:  # named as the document's fault, not only the request's
        log.warning("a %s reader failed on a document", request.format.value, exc_info=error)
        raise InvalidInputError(
            f"the document cannot be read ({type(error).__name__}: {str(error)[:200]})",
            where=DOCUMENT,
            hint=f"the document is read as format {request.format.value!r}",
        ) from None
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
                    f"{pod_set.count} pods of {name} {format_quantity(name, amount)} is "
                    "more than any cluster has",
                    where=f"{DOCUMENT} (pod set {index}, {pod_set.name!r}, requests)",
                    hint="check the quantity's unit (e.g. 1Ti, not 1e30)",
                )


class PodSetFields:
    """The paths of one pod set's checked fields in the submitted document."""

    def __init__(self, job_format: JobFormat, index: int) -> None:
        self.format = job_format
        hyperpod = job_format is JobFormat.HYPERPOD
        self.prefix = DOCUMENT if hyperpod else f"{DOCUMENT}.spec.podSets[{index}]"

    def path(self, field: str) -> str:
        written = _POD_SET_FIELDS[self.format].get(field, field)
        return f"{self.prefix} {written}" if written.startswith("(") else f"{self.prefix}.{written}"


def check_launch_fields(pod_set: PodSetSpec, fields: PodSetFields) -> None:
    """What the executor turns into pod names, argv and environment."""
    # pod-set names are DNS-1123 labels already: every reader checks them
    # (discovery.kubernetes_objects.pod_set_name), and HyperPod's one pod set is named by topoq
    check_environment(pod_set.environment, where=fields.path("environment"))
    check_command(pod_set.command, where=fields.path("command"))
    check_launch_size(pod_set.command, pod_set.environment, where=fields.path("command"))


def check_requests(pod_set: PodSetSpec, largest_node: Mapping[str, int], *, where: str) -> None:
    """A pod asks for something, and for no more of any resource than one node has."""
    asked = {name: amount for name, amount in pod_set.requests.items() if name != PODS}
    if not any(asked.values()):
        raise InvalidInputError(
            f"pod set {pod_set.name!r} requests nothing",
            where=where,
            hint="give each pod its requests (nvidia.com/gpu, cpu, memory) or an instance type",
        )
    for name, amount in asked.items():
        most = largest_node.get(name, 0)
        if amount > most:
            have = (
                f"the largest node has {format_quantity(name, most)}"
                if most
                else "no node of the cluster has any"
            )
            asked_amount = format_quantity(name, amount)
            raise InvalidInputError(
                f"each pod of {pod_set.name!r} asks for {name} {asked_amount}: {have}",
                where=where,
                hint=f"ask for at most {format_quantity(name, most)} of {name} per pod"
                if most
                else f"leave {name} out: the cluster has no {name}",
            )


def _max_retry(request: SubmitJobRequest) -> int:
    if request.max_retry is not None:
        return request.max_retry
    if request.format is not JobFormat.HYPERPOD:
        return 0
    value = request.document.get(_HYPERPOD_MAX_RETRY, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRY_LIMIT:
        raise InvalidInputError(
            f"expected a whole number from 0 to {MAX_RETRY_LIMIT}, got {value!r:.40}",
            where=f"{DOCUMENT}.{_HYPERPOD_MAX_RETRY}",
            hint=f"how often a failed job is restarted: 0 to {MAX_RETRY_LIMIT}",
        )
    return value


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
