"""The training-job objects HyperPod users apply, read as the workload they describe (no
operator needed): a ``HyperPodPyTorchJob`` (``sagemaker.amazonaws.com/v1``: each entry of
``spec.replicaSpecs`` a pod set of ``replicas`` pods) and a Kubeflow ``PyTorchJob``
(``kubeflow.org/v1``: ``spec.pytorchReplicaSpecs.Master`` and ``.Worker``, pod sets
``master`` and ``worker``). The same job as the HyperPod job file ``topoq submit`` reads.

Each pod set's requests, node selector, required affinity, tolerations, command and
environment come from its pod template as for a Kueue Workload; its topology from the
template's annotations (``kueue.x-k8s.io/podset-required-topology`` …), else the object's own
(the HyperPod CLI writes them on both); the queue and priority class from the
``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` labels.
"""

from __future__ import annotations

from topoq.discovery.documents import Fields
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    main_container,
    namespace_name,
    pod_requests,
    required_affinity_terms,
    tolerations,
    workload_name,
)
from topoq.discovery.kubernetes_workload import KUEUE_TOPOLOGY_ANNOTATIONS, pod_set_topology
from topoq.domain.errors import InvalidInputError
from topoq.domain.workload import PodSetSpec, WorkloadSpec

HYPERPOD_JOB = ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob")
KUBEFLOW_JOB = ("kubeflow.org/v1", "PyTorchJob")
TRAINING_JOB_KINDS = (HYPERPOD_JOB, KUBEFLOW_JOB)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUBEFLOW_ROLES = ("Master", "Worker")


def is_training_job(doc: object) -> bool:
    return isinstance(doc, dict) and (doc.get("apiVersion"), doc.get("kind")) in TRAINING_JOB_KINDS


def workload_from_training_job(doc: object, *, source: str) -> WorkloadSpec:
    try:
        return _workload(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _workload(fields: Fields) -> WorkloadSpec:
    metadata, spec = fields.mapping("metadata"), fields.mapping("spec")
    name = workload_name(metadata, "name")
    namespace = namespace_name(metadata, "namespace", DEFAULT_NAMESPACE)
    labels = metadata.string_map("labels")
    annotations = metadata.mapping("annotations")
    hyperpod = fields.text("kind") == HYPERPOD_JOB[1]
    if hyperpod:
        records = [(record.text("name", "pod"), record) for record in spec.records("replicaSpecs")]
    else:
        replicas = spec.mapping("pytorchReplicaSpecs")
        records = [
            (role.lower(), replicas.mapping(role)) for role in KUBEFLOW_ROLES if replicas.has(role)
        ]
    if not records:
        raise InvalidInputError(
            "no replicas to run",
            where=spec.path(
                "replicaSpecs" if fields.text("kind") == HYPERPOD_JOB[1] else "pytorchReplicaSpecs"
            ),
            hint="give at least one replica spec with a pod template",
        )
    pod_sets = tuple(_pod_set(pod_set, record, annotations) for pod_set, record in records)
    try:
        return WorkloadSpec(
            name, pod_sets, namespace, labels.get(QUEUE_LABEL), labels.get(PRIORITY_LABEL)
        )
    except InvalidInputError as error:
        raise error.located(spec.where) from None


def _pod_set(name: str, record: Fields, outer: Fields) -> PodSetSpec:
    template = Fields(record.required("template"), record.path("template"))
    inner = template.mapping("metadata").mapping("annotations")
    annotations = inner if any(inner.has(k) for k in KUEUE_TOPOLOGY_ANNOTATIONS) else outer
    count = record.integer("replicas") if record.has("replicas") else 1
    try:
        return template_pod_set(name, count, template, annotations)
    except InvalidInputError as error:
        raise error.located(record.where) from None


def template_pod_set(name: str, count: int, template: Fields, annotations: Fields) -> PodSetSpec:
    """A pod set of ``count`` pods, each as the pod ``template`` asks, placed as the Kueue
    topology ``annotations`` say."""
    pod_spec = template.mapping("spec")
    command, environment, image = main_container(pod_spec)
    return PodSetSpec(
        name,
        count,
        pod_requests(pod_spec),
        pod_spec.string_map("nodeSelector"),
        required_affinity_terms(pod_spec),
        tolerations(pod_spec),
        pod_set_topology(annotations, Fields({}, "")),
        command,
        environment,
        image,
    )
