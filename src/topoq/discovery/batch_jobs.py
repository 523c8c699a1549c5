"""A Kubernetes ``batch/v1`` Job read as the gang it describes (pure): one pod set of
``parallelism`` pods, each asking what its pod template asks, placed as the template's Kueue
annotations say (``kueue.x-k8s.io/podset-required-topology`` …); the queue and priority class
from the Job's ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` labels; its
time limit from ``activeDeadlineSeconds``. This is how the Kubernetes executor takes in the Jobs
HyperPod users submit (docs/executors.md).

topoq runs a Job as one gang: every pod at once. So a Job whose ``completions`` differs from its
``parallelism`` (pods run in waves) is refused, naming the field to change, as is a Job that
runs no pod.
"""

from __future__ import annotations

from topoq.discovery.documents import Fields
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    namespace_name,
    workload_name,
)
from topoq.discovery.pod_groups import is_pod_group, workload_from_pod_group
from topoq.discovery.training_jobs import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    is_training_job,
    template_pod_set,
    workload_from_training_job,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.workload import WorkloadSpec

BATCH_JOB = ("batch/v1", "Job")
JOB_POD_SET = "main"
"""The name of a Job's one pod set."""
INDEXED = "Indexed"
COMPLETION_MODES = (INDEXED, "NonIndexed")


def is_batch_job(doc: object) -> bool:
    return isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) == BATCH_JOB


def workload_from_batch_job(doc: object, *, source: str) -> WorkloadSpec:
    try:
        return _workload(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _workload(fields: Fields) -> WorkloadSpec:
    metadata, spec = fields.mapping("metadata"), fields.mapping("spec")
    name = workload_name(metadata, "name")
    namespace = namespace_name(metadata, "namespace", DEFAULT_NAMESPACE)
    labels = metadata.string_map("labels")
    mode = spec.text("completionMode", "NonIndexed")
    if mode not in COMPLETION_MODES:
        raise InvalidInputError(
            f"completion mode {mode!r} is not one Kubernetes has",
            where=spec.path("completionMode"),
            hint=f"use {' or '.join(COMPLETION_MODES)}",
        )
    parallelism = spec.integer("parallelism", 1)
    completions = spec.integer("completions", parallelism)
    if parallelism < 1:
        raise InvalidInputError(
            "the Job runs no pod",
            where=spec.path("parallelism"),
            hint="give the number of pods of the gang (1 or more)",
        )
    if completions != parallelism:
        raise InvalidInputError(
            f"completions ({completions}) differs from parallelism ({parallelism})",
            where=spec.path("completions"),
            hint="topoq runs a Job as one gang, every pod at once: make completions equal "
            "to parallelism",
        )
    template = Fields(spec.required("template"), spec.path("template"))
    annotations = template.mapping("metadata").mapping("annotations")
    deadline = spec.integer("activeDeadlineSeconds", 0)
    try:
        pod_set = template_pod_set(JOB_POD_SET, parallelism, template, annotations)
        return WorkloadSpec(
            name,
            (pod_set,),
            namespace,
            labels.get(QUEUE_LABEL),
            labels.get(PRIORITY_LABEL),
            time_limit_s=float(deadline) if deadline > 0 else None,
        )
    except InvalidInputError as error:
        raise error.located(template.where) from None


def workload_from_kubernetes_object(doc: object, *, source: str) -> WorkloadSpec:
    """A ``batch/v1`` Job, a ``HyperPodPyTorchJob``, a Kubeflow ``PyTorchJob`` manifest, or a
    group of Pods (a ``v1`` Pod, or a ``v1`` List of the Pods of one group)."""
    if is_batch_job(doc):
        return workload_from_batch_job(doc, source=source)
    if is_training_job(doc):
        return workload_from_training_job(doc, source=source)
    if is_pod_group(doc):
        return workload_from_pod_group(doc, source=source)
    found = (
        f"apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r}"
        if isinstance(doc, dict)
        else "no mapping"
    )
    raise InvalidInputError(
        f"not a Kubernetes object this version runs ({found})",
        where=source,
        hint="give a batch/v1 Job, a sagemaker.amazonaws.com/v1 HyperPodPyTorchJob, a "
        "kubeflow.org/v1 PyTorchJob, or a v1 Pod (a v1 List of the Pods of one group)",
    )
