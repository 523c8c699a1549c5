"""What the Kubernetes executor writes to the API server, as plain objects (pure): one Pod per
pod of a placed gang, and one headless Service per attempt that makes rank 0 resolvable.

Names are deterministic — ``<job>-a<attempt>-<rank>`` after the job id is made a DNS label
(``kube_name``) — so a retry after a crash finds the pod it made before instead of making a
second. Each pod carries topoq's scheduler name (kube-scheduler leaves it alone; topoq binds
it to its placed node through ``pods/binding``), the labels that find it again (job, attempt,
rank, team; ``app.kubernetes.io/managed-by: topoq``), the exact job id and team as
annotations, the GPUs and other resources of its pod set as requests and limits, its pod
set's image (else ``PodOptions.image``), and the variables the local executor sets
(``topoq.executors.environment``) with ``MASTER_ADDR`` the DNS name of rank 0 under the
Service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topoq.domain.job import JobId
from topoq.domain.kube_names import DNS_LABEL_LIMIT, kube_name
from topoq.domain.workload import PodSetSpec, Toleration
from topoq.engine.ports import ExecutorStartFailed, GangLaunch
from topoq.executors.environment import (
    GangContext,
    PodPlan,
    hosts_in_node_rank_order,
    launcher_environment,
    plan_pods,
)

SCHEDULER_NAME = "topoq"
MANAGED_BY = ("app.kubernetes.io/managed-by", "topoq")
JOB_LABEL = "topoq.io/job"
ATTEMPT_LABEL = "topoq.io/attempt"
RANK_LABEL = "topoq.io/rank"
TEAM_LABEL = "topoq.io/team"
POD_SET_LABEL = "topoq.io/pod-set"
JOB_ID_ANNOTATION = "topoq.io/job-id"
TEAM_ANNOTATION = "topoq.io/team"
NODE_ANNOTATION = "topoq.io/node"
"""The node topoq placed the pod on (it binds the pod there)."""
PODS_ANNOTATION = "topoq.io/pods"
"""How many pods the attempt has (so that a restarted executor knows a gang is whole)."""
MANAGED_SELECTOR = "=".join(MANAGED_BY)
MASTER_PORT = 29500
CONTAINER_NAME = "main"
DEFAULT_IMAGE = "python:3.11-slim"
NAME_LIMIT_BYTES = 255
"""The longest file name a container runtime can exec."""


def attempt_name(job: JobId, attempt: int) -> str:
    """The Service of one attempt, and the stem of its pods' names."""
    suffix = f"-a{attempt}"
    return kube_name(job, limit=DNS_LABEL_LIMIT - len(suffix) - 6) + suffix  # room for -<rank>


def pod_name(job: JobId, attempt: int, rank: int) -> str:
    return f"{attempt_name(job, attempt)}-{rank}"


def job_selector(job: JobId, attempt: int | None = None) -> str:
    """The label selector of a job's pods (of one attempt, when given)."""
    selector = f"{MANAGED_SELECTOR},{JOB_LABEL}={kube_name(job)}"
    return selector if attempt is None else f"{selector},{ATTEMPT_LABEL}={attempt}"


@dataclass(frozen=True)
class PodOptions:
    """How every pod of the executor is made (``topoq server --executor kubernetes``)."""

    namespace_pattern: str = "{team}"
    """The team's namespace; ``{team}`` is the team's name as a DNS label."""
    image: str = DEFAULT_IMAGE
    """The image of pods whose pod set names none (their command, or the default workload)."""
    default_command: tuple[str, ...] = ("python3", "-c")
    """How the default workload runs: this, then the workload's source."""
    service_account: str | None = None
    extra_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedPod:
    plan: PodPlan
    name: str
    manifest: dict[str, Any]


@dataclass(frozen=True)
class GangManifests:
    namespace: str
    service: dict[str, Any]
    pods: tuple[PlannedPod, ...]


def attempt_labels(launch: GangLaunch) -> dict[str, str]:
    """The labels that find the pods of ``launch``'s attempt again (``job_selector``)."""
    return {
        MANAGED_BY[0]: MANAGED_BY[1],
        JOB_LABEL: kube_name(launch.job.id),
        ATTEMPT_LABEL: str(launch.attempt),
        TEAM_LABEL: kube_name(launch.job.team),
    }


def attempt_annotations(launch: GangLaunch, pods: int) -> dict[str, str]:
    """The exact job id and team of an attempt's pods, and how many pods it has."""
    return {
        JOB_ID_ANNOTATION: str(launch.job.id),
        TEAM_ANNOTATION: str(launch.job.team),
        PODS_ANNOTATION: str(pods),
    }


def namespace_of(team: str, options: PodOptions) -> str:
    return options.namespace_pattern.format(team=kube_name(team))


def gang_manifests(launch: GangLaunch, options: PodOptions, default_workload: str) -> GangManifests:
    """The Service and Pods of ``launch``; raises ``ExecutorStartFailed`` for a gang no
    container could run (a variable name with ``=`` or a NUL, a NUL in a value or the
    command, a program name longer than a file name can be)."""
    spec = launch.job
    plans = plan_pods(spec.workload, launch.allocation)
    namespace = namespace_of(spec.team, options)
    stem = attempt_name(spec.id, launch.attempt)
    hosts = hosts_in_node_rank_order(plans)
    context = GangContext(
        spec.id, launch.attempt, len(plans), hosts, MASTER_PORT, launch.node_labels
    )
    master = f"{stem}-0.{stem}.{namespace}.svc"
    pod_sets = {pod_set.name: pod_set for pod_set in spec.workload.pod_sets}
    labels = attempt_labels(launch) | dict(options.extra_labels)
    annotations = attempt_annotations(launch, len(plans))
    pods = []
    for plan in plans:
        pod_set = pod_sets[plan.pod_set]
        environment = dict(launch.environment) | dict(pod_set.environment)
        variables = launcher_environment(context, plan, ())
        del variables["CUDA_VISIBLE_DEVICES"]  # the device plugin sets it
        variables |= {"MASTER_ADDR": master, "SM_NUM_GPUS": str(plan.gpus)}
        environment |= variables
        command = pod_command(launch, pod_set, options, default_workload)
        _check_startable(environment, command, f"pod set {plan.pod_set!r}")
        name = f"{stem}-{plan.rank}"
        amounts = pod_set.requests.formatted()
        resources: dict[str, Any] = {"requests": amounts}
        extended = {k: v for k, v in amounts.items() if "/" in k}
        if extended:
            resources["limits"] = extended  # extended resources need limits equal to requests
        pod_spec: dict[str, Any] = {
            "schedulerName": SCHEDULER_NAME,
            "hostname": name,
            "subdomain": stem,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": pod_set.image or options.image,
                    **({"command": list(command)} if command else {}),
                    "env": [{"name": k, "value": v} for k, v in sorted(environment.items())],
                    "resources": resources,
                }
            ],
        }
        if options.service_account:
            pod_spec["serviceAccountName"] = options.service_account
        if pod_set.tolerations:
            pod_spec["tolerations"] = [_toleration(t) for t in pod_set.tolerations]
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {
                    **labels,
                    RANK_LABEL: str(plan.rank),
                    POD_SET_LABEL: kube_name(plan.pod_set),
                },
                "annotations": {**annotations, NODE_ANNOTATION: plan.node},
            },
            "spec": pod_spec,
        }
        pods.append(PlannedPod(plan, name, manifest))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": stem,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_LABEL: labels[JOB_LABEL], ATTEMPT_LABEL: labels[ATTEMPT_LABEL]},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": MASTER_PORT}],
        },
    }
    return GangManifests(namespace, service, tuple(pods))


def pod_command(
    launch: GangLaunch, pod_set: PodSetSpec, options: PodOptions, default_workload: str
) -> tuple[str, ...]:
    """What a pod's container runs: its pod set's command; without one, the entrypoint of the
    pod set's own image (empty: no command is written, as in any Kubernetes manifest), else
    the default workload in the executor's image."""
    command = launch.commands.get(pod_set.name)
    if command:
        return command
    if pod_set.image is not None:
        return ()
    return (*options.default_command, default_workload)


def _toleration(toleration: Toleration) -> dict[str, Any]:
    found = {
        "key": toleration.key,
        "operator": toleration.operator.value,
        "value": toleration.value,
        "effect": toleration.effect,
    }
    return {k: v for k, v in found.items() if v not in (None, "")}


def _check_startable(environment: Mapping[str, str], command: Sequence[str], where: str) -> None:
    for name, value in environment.items():
        if not name or "=" in name or "\0" in name:
            raise ExecutorStartFailed(
                f"environment variable name {name!r} cannot be set",
                where=where,
                hint="a name is not empty and has no '=' or NUL",
            )
        if "\0" in value:
            raise ExecutorStartFailed(
                f"environment variable {name!r} holds a NUL", where=where, hint="remove it"
            )
    if any("\0" in part for part in command) or (command and not command[0]):
        raise ExecutorStartFailed(
            "the command's program is empty or it holds a NUL",
            where=where,
            hint="give a plain argv",
        )
    if command and any(len(part.encode()) > NAME_LIMIT_BYTES for part in command[0].split("/")):
        raise ExecutorStartFailed(
            f"the program name is longer than {NAME_LIMIT_BYTES} bytes",
            where=where,
            hint="no container runtime can run it",
        )


def job_id_of(pod: Mapping[str, Any]) -> JobId | None:
    """The job of a pod topoq made (None for any other pod)."""
    metadata = pod.get("metadata") or {}
    if (metadata.get("labels") or {}).get(MANAGED_BY[0]) != MANAGED_BY[1]:
        return None
    found = (metadata.get("annotations") or {}).get(JOB_ID_ANNOTATION)
    return JobId(found) if found else None
