"""A ``submit`` (or ``stream``) entry of a scenario: the job's team, shape, run time and fate.

The shape is given one of three ways: ``job`` (a workload file), ``podSets`` (inline, as in
topoq's job file) or ``gpus`` per pod with ``pods``, ``required`` and ``preferred``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topoq.discovery.documents import Fields, read_document
from topoq.discovery.jobfile import (
    JOB_API_VERSION,
    JOB_KIND,
    dependencies_from_document,
    load_workload,
    workload_from_job_file,
)
from topoq.domain.durations import duration_s
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.gpu_share import MAX_GPUS_ASKED, bounded_gpu_ask
from topoq.domain.job import Dependency, DependencyKind, JobId, JobSpec
from topoq.domain.names import check_label_name
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec, TopologyRequest, WorkloadSpec
from topoq.sim.values import count, names, relative_path, seconds, unknown_name
from topoq.wire.v1.jobs import MAX_RETRY_LIMIT

MAX_PODS = 100_000
"""Pods of the ``pods`` × ``gpus`` shortcut."""

JOB_KEYS = (
    "team",
    "priority",
    "user",
    "runtime_s",
    "time_limit",
    "exit_code",
    "max_retry",
    "job",
    "podSets",
    "pods",
    "gpus",
    "required",
    "preferred",
)
DEPENDENCY_KEYS = {
    "after_ok": DependencyKind.AFTER_OK,
    "after_any": DependencyKind.AFTER_ANY,
    "after_failed": DependencyKind.AFTER_FAILED,
}
SUBMIT_KEYS = ("id", *JOB_KEYS, *DEPENDENCY_KEYS)
_SHAPES = ("job", "podSets", "gpus")
_SHORTCUT_ONLY = ("pods", "required", "preferred")


@dataclass(frozen=True)
class Submit:
    spec: JobSpec
    exit_codes: tuple[int, ...] = (0,)
    """Exit code of each attempt that runs to its end; the last one repeats."""
    communication_share: float | None = None
    """The share of an iteration the job spends communicating at its tightest placement,
    for the cost model (None: by its size, ``network.default_communication_share``)."""


@dataclass(frozen=True)
class JobContext:
    """What a submission is checked against."""

    base: Path
    policy: ClusterPolicy
    topology: TopologySpec


def read_submit(fields: Fields, at_s: float, context: JobContext, job_id: str) -> Submit:
    """The submission at ``at_s``; ``job_id`` is the id (a stream passes its generated ones)."""
    workload = _workload(fields, context, job_id)
    priority = fields.optional_text("priority")
    if priority is None and workload.priority_class is not None:
        priority = workload.priority_class
        where = f"{fields.path('job')} (priorityClassName)"
        _check_priority(priority, context.policy, where, "; or give `priority` to override it")
    else:
        _check_priority(priority, context.policy, fields.path("priority"))
    team = check_label_name(fields.text("team"), what="team name", where=fields.path("team"))
    spec = JobSpec(
        id=JobId(job_id),
        team=TeamName(team),
        workload=workload,
        submitted_at=at_s,
        priority_class=priority,
        dependencies=_dependencies(fields) + _file_dependencies(fields, context),
        max_retry=count(fields, "max_retry", 0, least=0, most=MAX_RETRY_LIMIT),
        user=fields.optional_text("user"),
        runtime_s=seconds(fields, "runtime_s"),
        time_limit_s=_time_limit(fields, workload),
    )
    return Submit(spec, _exit_codes(fields))


def _time_limit(fields: Fields, workload: WorkloadSpec) -> float | None:
    """``time_limit`` (seconds or a duration such as ``2h``), else the job file's."""
    if fields.has("time_limit"):
        return duration_s(fields.raw("time_limit"), where=fields.path("time_limit"))
    return workload.time_limit_s


def _workload(fields: Fields, context: JobContext, name: str) -> WorkloadSpec:
    given = [key for key in _SHAPES if fields.has(key)]
    if len(given) != 1:
        found = f"{' and '.join(given)} are given" if given else "no shape is given"
        raise InvalidInputError(
            found,
            where=fields.where,
            hint="give exactly one of job (a workload file), podSets, or gpus (with pods)",
        )
    if given[0] != "gpus":
        extra = [key for key in _SHORTCUT_ONLY if fields.has(key)]
        if extra:
            raise InvalidInputError(
                f"{extra[0]} goes only with gpus",
                where=fields.path(extra[0]),
                hint=f"put it into the pod sets of {given[0]}, or use the gpus shortcut",
            )
    if given[0] == "job":
        path = relative_path(context.base, fields.text("job"), fields.path("job"))
        try:
            workload = load_workload(path)
        except InvalidInputError as error:
            raise error.located(fields.path("job")) from None
    elif given[0] == "podSets":
        workload = _inline_pod_sets(fields, name)
    else:
        workload = _shortcut(fields, name)
    _check_levels(workload, context.topology, fields.path(given[0]))
    return workload


def _inline_pod_sets(fields: Fields, name: str) -> WorkloadSpec:
    document = {
        "apiVersion": JOB_API_VERSION,
        "kind": JOB_KIND,
        "metadata": {"name": name},
        "spec": {"podSets": fields.raw("podSets")},
    }
    try:
        return workload_from_job_file(document, source=fields.where)
    except InvalidInputError as error:
        where = (error.where or "").replace(f"{fields.where}: spec.podSets", fields.path("podSets"))
        raise InvalidInputError(error.message, where=where, hint=error.hint) from None


def _shortcut(fields: Fields, name: str) -> WorkloadSpec:
    pod_set = PodSetSpec(
        name="workers",
        count=count(fields, "pods", 1, most=MAX_PODS),
        requests=_gpus_per_pod(fields),
        topology=TopologyRequest(
            required=fields.optional_text("required"), preferred=fields.optional_text("preferred")
        ),
    )
    return WorkloadSpec(name, (pod_set,))


def _gpus_per_pod(fields: Fields) -> Resources:
    """``gpus``: whole GPUs per pod (1 or more), or a share of one GPU (``0.5``, ``250m``) as
    a job file asks it — kept as ``topoq.io/gpu-milli``, packed onto one device of a node
    open to shares (docs/gpu-sharing.md)."""
    where = fields.path("gpus")
    value = fields.required("gpus")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInputError(
            f"expected a number of GPUs, got {value!r:.60}", where=where, hint=_GPUS_HINT
        )
    asked = bounded_gpu_ask(value, where)
    if asked is None:
        raise InvalidInputError(f"is {value}", where=where, hint=_GPUS_HINT)
    resource, amount = asked
    return Resources({resource: amount})


_GPUS_HINT = f"give whole GPUs per pod (1 to {MAX_GPUS_ASKED:,}), or a share of one GPU such as 0.5"


def _check_levels(workload: WorkloadSpec, topology: TopologySpec, where: str) -> None:
    """Every level a pod set names must be a level of the cluster (else the cycle would fail)."""
    for pod_set in workload.pod_sets:
        for level in pod_set.topology.named_levels:
            if level not in topology.levels:
                raise unknown_name(
                    "level",
                    level,
                    topology.levels,
                    f"{where} (pod set {pod_set.name})",
                    f"the cluster's levels are {', '.join(topology.levels)}",
                )


def _check_priority(
    priority: str | None, policy: ClusterPolicy, where: str, note: str = ""
) -> None:
    if priority is None or priority in policy.weight_of_class:
        return
    known = [cls.name for cls in policy.priority_classes]
    hint = (
        f"use one of the policy's classes: {', '.join(known)}"
        if known
        else "the policy defines no priority classes; remove priority or define classes"
    )
    raise unknown_name("priority class", priority, known, where, hint + note)


def _dependencies(fields: Fields) -> tuple[Dependency, ...]:
    found: list[Dependency] = []
    for key, kind in DEPENDENCY_KEYS.items():
        found.extend(Dependency(kind, JobId(name)) for name in names(fields, key))
    return tuple(found)


def _file_dependencies(fields: Fields, context: JobContext) -> tuple[Dependency, ...]:
    """Those the workload file given as ``job`` names, as the server reads them."""
    if not fields.has("job"):
        return ()
    path = relative_path(context.base, fields.text("job"), fields.path("job"))
    try:
        written = dependencies_from_document(read_document(path), source=str(path))
    except InvalidInputError as error:
        raise error.located(fields.path("job")) from None
    return tuple(item.dependency for item in written)


def _exit_codes(fields: Fields) -> tuple[int, ...]:
    value = fields.raw("exit_code", 0)
    codes = value if isinstance(value, list) else [value]
    if not codes:
        raise InvalidInputError(
            "is an empty list", where=fields.path("exit_code"), hint="give a code per attempt"
        )
    for code in codes:
        if isinstance(code, bool) or not isinstance(code, int):
            raise InvalidInputError(
                f"expected an exit code (a whole number), got {code!r}",
                where=fields.path("exit_code"),
                hint="0 is success; give a list for one code per attempt, e.g. [1, 0]",
            )
    return tuple(codes)
