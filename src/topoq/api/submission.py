"""A submission as a job: read the document in its format, then check it against the cluster
and the policy (team, priority class, topology levels, the largest node) so that a job that
could never be scheduled is refused with the field to fix, not left pending forever; and check
every field that becomes a name, a path, a process or an environment (ids, the team, pod-set
names, commands, environment variables) so that no admitted gang fails to start on them."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from topoq.api.errors import UNREADABLE_INPUT
from topoq.core.dependencies import dependency_cycle
from topoq.core.priority_classes import policy_class_of
from topoq.discovery.batch_jobs import workload_from_kubernetes_object
from topoq.discovery.hyperpod_job import HYPERPOD_JOB_NAME_FIELD, workload_from_hyperpod_job
from topoq.discovery.job_dependencies import (
    WrittenDependency,
    dependencies_from_hyperpod_job,
    dependencies_from_job_file,
    dependencies_from_kueue,
    no_dependencies,
)
from topoq.discovery.jobfile import workload_from_job_file
from topoq.discovery.kubernetes_workload import workload_from_kueue
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.gpu_share import GPU_SHARE, GPU_SHARING_LABEL, gpus_text
from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase, JobSpec
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
    JobFormat.KUBERNETES: workload_from_kubernetes_object,
}
_DEPENDENCY_READERS = {
    JobFormat.TOPOQ: dependencies_from_job_file,
    JobFormat.HYPERPOD: dependencies_from_hyperpod_job,
    JobFormat.KUEUE: dependencies_from_kueue,
    JobFormat.KUBERNETES: no_dependencies,
}
StoredPhases = Callable[[Collection[JobId]], Mapping[JobId, JobPhase]]
"""The phase of each of the ids that a stored job has (``Store.phases_of``)."""
T = TypeVar("T")
_HYPERPOD_NAMESPACE = re.compile(r"^hyperpod-ns-(?P<team>.+?)(?:-localqueue)?$")
_HYPERPOD_MAX_RETRY = "max_retry"
MAX_PODS_PER_JOB = 100_000
MAX_AMOUNT = 2**62
_NAME_FIELD = {
    JobFormat.TOPOQ: f"{DOCUMENT}.metadata.name",
    JobFormat.HYPERPOD: f"{DOCUMENT}.{HYPERPOD_JOB_NAME_FIELD}",
    JobFormat.KUEUE: f"{DOCUMENT}.metadata.name",
    JobFormat.KUBERNETES: f"{DOCUMENT}.metadata.name",
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
    JobFormat.KUBERNETES: {
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
    stored_phases: StoredPhases,
) -> JobSpec:
    """The job a submission asks for; ``InvalidInputError`` names the field to fix.
    ``largest_node`` is the most of each resource one node of the cluster has;
    ``stored_phases`` (``Store.phases_of``) says which upstream jobs exist."""
    workload = read_workload(request)
    job_id = job_id_of(request, workload)
    written = written_dependencies(request)
    team = check_label_name(team_of(request, workload), what="team name", where="team")
    check_team(team, policy)
    priority_class = charged_class(
        request.priority_class or workload.priority_class,
        policy,
        overridden=request.priority_class is not None,
    )
    check_levels(workload, topology)
    check_sizes(workload)
    for index, pod_set in enumerate(workload.pod_sets):
        fields = PodSetFields(request.format, index)
        check_launch_fields(pod_set, fields)
        check_requests(pod_set, largest_node, where=fields.path("requests"))
    dependencies = checked_dependencies(job_id, written, stored_phases)
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
    return _read_document(request, _READERS[request.format])


def _read_document(request: SubmitJobRequest, reader: Callable[..., T]) -> T:
    try:
        return reader(request.document, source=DOCUMENT)
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


def written_dependencies(request: SubmitJobRequest) -> list[WrittenDependency]:
    """The request's ``dependencies``, then those its document names, each once."""
    given = [
        WrittenDependency(
            Dependency(d.kind, JobId(check_job_id(d.job, where=f"dependencies[{i}].job"))),
            f"dependencies[{i}].job",
        )
        for i, d in enumerate(request.dependencies)
    ]
    in_document = [
        WrittenDependency(written.dependency, f"{DOCUMENT}.{written.where}")
        for written in _read_document(request, _DEPENDENCY_READERS[request.format])
    ]
    unique: dict[Dependency, WrittenDependency] = {}
    for written in given + in_document:
        unique.setdefault(written.dependency, written)
    return list(unique.values())


def checked_dependencies(
    job_id: JobId, written: Sequence[WrittenDependency], stored_phases: StoredPhases
) -> tuple[Dependency, ...]:
    """The dependencies, once none names the job itself (nor closes a cycle), none asks for
    both success and failure of one job, and a job has every upstream id (one store query).
    Jobs stored earlier depend only on jobs stored before them, so one submission can close a
    cycle only through itself."""
    cycle = dependency_cycle({job_id: [w.dependency.job for w in written]})
    if cycle is not None:
        first = next(w for w in written if w.dependency.job == cycle[1])
        raise InvalidInputError(
            "the job depends on itself"
            if len(cycle) == 2
            else f"the dependencies close a cycle: {' -> '.join(cycle)}",
            where=first.where,
            hint="name the jobs that must end before this one starts",
        )
    _check_not_contradictory(written)
    found = stored_phases({w.dependency.job for w in written}) if written else {}
    for item in written:
        if item.dependency.job not in found:
            raise InvalidInputError(
                f"no job has the id {item.dependency.job!r}",
                where=item.where,
                hint=f"submit {item.dependency.job} first, or fix the id: a job can depend "
                "only on jobs already submitted",
            )
    return tuple(w.dependency for w in written)


def _check_not_contradictory(written: Sequence[WrittenDependency]) -> None:
    kinds: dict[JobId, set[DependencyKind]] = {}
    for item in written:
        kinds.setdefault(item.dependency.job, set()).add(item.dependency.kind)
        if {DependencyKind.AFTER_OK, DependencyKind.AFTER_FAILED} <= kinds[item.dependency.job]:
            raise InvalidInputError(
                f"the job waits for {item.dependency.job} both to succeed and to fail",
                where=item.where,
                hint="keep one of after-ok and after-failed, or use after-any",
            )


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


def charged_class(
    name: str | None, policy: ClusterPolicy | None, *, overridden: bool
) -> str | None:
    """The policy's class a job with priority class ``name`` is charged to (None: the
    policy's default): ``name``, or the class HyperPod's ``<class>-priority`` names
    (``core.priority_classes.policy_class_of``); a class the policy lacks is refused."""
    if name is None:
        return None
    charged = policy_class_of(name, policy) if policy is not None else None
    if charged is not None:
        return charged
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
        self.prefix = {
            JobFormat.HYPERPOD: DOCUMENT,
            JobFormat.KUBERNETES: f"{DOCUMENT}.spec (pod set {index})",
        }.get(job_format, f"{DOCUMENT}.spec.podSets[{index}]")

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
        if name == GPU_SHARE and not most:
            raise InvalidInputError(
                f"each pod of {pod_set.name!r} asks for a share of one GPU "
                f"({gpus_text(0, amount)}): no node of the cluster is open to GPU shares",
                where=where,
                hint="ask for whole GPUs, or have an admin label GPU nodes "
                f'{GPU_SHARING_LABEL}: "true"',
            )
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
