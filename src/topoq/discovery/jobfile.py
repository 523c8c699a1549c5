"""Workload files: topoq's own job file, and detection of the three accepted workload forms.

topoq's job file (YAML or JSON; snake_case keys are accepted as well as camelCase)::

    apiVersion: topoq.io/v1
    kind: Job
    metadata: {name: llama-70b, namespace: nlp}
    spec:
      queueName: nlp-queue                 # optional
      priorityClassName: training-priority # optional
      afterOk: [prep]                      # optional; also afterAny, afterFailed (job_dependencies)
      timeLimit: 2h                        # optional: seconds, 90m, 2h, 1-00:00:00
      podSets:
      - name: workers
        count: 32
        requests: {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}
        # or instanceType: p5.48xlarge — the whole instance — optionally with accelerators: 4
        # for that share of its vCPUs and memory (HyperPod's sizing, see instance_sizing).
        # Given both, the requests override what the instance type derives, per resource.
        nodeSelector: {node.kubernetes.io/instance-type: ml.p5.48xlarge}
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
        topology:
          required: topology.k8s.aws/network-node-layer-2
          preferred: topology.k8s.aws/network-node-layer-3
          slices: [{level: topology.k8s.aws/network-node-layer-3, size: 8}]  # outermost first
          group: llama
          spread: {level: kubernetes.io/hostname, maxPodsPerDomain: 1}
          # unconstrained: true   (no required or preferred level)
        command: [torchrun, train.py]      # optional; also args, environment
        image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime  # optional: run by the kubernetes
                                           # executor; the local one runs the command on its host

``instanceType`` only sizes the requests; add a ``nodeSelector`` to pin the pods to that type.
Unknown keys are rejected (with the allowed ones) so that a typo does not silently drop a
constraint.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from topoq.discovery.batch_jobs import is_batch_job, workload_from_batch_job
from topoq.discovery.documents import Fields, argv, read_document
from topoq.discovery.hyperpod_job import HYPERPOD_JOB_NAME_FIELD, workload_from_hyperpod_job
from topoq.discovery.instance_sizing import instance_requests, known_instance_type
from topoq.discovery.job_dependencies import (
    JOB_FILE_DEPENDENCY_KEYS,
    WrittenDependency,
    dependencies_from_hyperpod_job,
    dependencies_from_job_file,
    dependencies_from_kueue,
)
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    namespace_name,
    optional_image,
    optional_name,
    pod_set_name,
    requests_with_gpu_shares,
    tolerations,
    workload_name,
)
from topoq.discovery.kubernetes_workload import (
    KUEUE_WORKLOAD_API_VERSIONS,
    WORKLOAD_KIND,
    workload_from_kueue,
)
from topoq.discovery.own_format_fields import optional_duration, reject_unknown_keys, spelling
from topoq.discovery.pod_groups import is_pod_group, workload_from_pod_group
from topoq.discovery.training_jobs import is_training_job, workload_from_training_job
from topoq.domain.errors import InvalidInputError
from topoq.domain.resources import Resources
from topoq.domain.workload import (
    PodSetSpec,
    SliceConstraint,
    SpreadConstraint,
    TopologyRequest,
    WorkloadSpec,
)

__all__ = [
    "JOB_API_VERSION",
    "JOB_KIND",
    "dependencies_from_document",
    "is_job_document",
    "load_workload",
    "workload_from_document",
    "workload_from_hyperpod_job",
    "workload_from_job_file",
]

JOB_API_VERSION = "topoq.io/v1"
JOB_KIND = "Job"
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
_SPEC_KEYS = ("podSets", "queueName", "priorityClassName", "timeLimit", *JOB_FILE_DEPENDENCY_KEYS)
"""The dependency keys are read by ``job_dependencies.dependencies_from_job_file``."""
_POD_SET_KEYS = (
    "name",
    "count",
    "requests",
    "instanceType",
    "accelerators",
    "nodeSelector",
    "tolerations",
    "topology",
    "command",
    "args",
    "environment",
    "image",
)
_TOPOLOGY_KEYS = ("required", "preferred", "unconstrained", "slices", "group", "spread")
_SLICE_KEYS = ("level", "size")
_SPREAD_KEYS = ("level", "maxPodsPerDomain")
_ACCEPTED_FORMS = (
    "a Kueue Workload (apiVersion kueue.x-k8s.io/v1beta1 or v1beta2, kind Workload), "
    f"a topoq job file (apiVersion {JOB_API_VERSION}, kind {JOB_KIND}), "
    f"a HyperPod PyTorch job (the hyp-pytorch-job fields, with {HYPERPOD_JOB_NAME_FIELD}), "
    "a HyperPodPyTorchJob or Kubeflow PyTorchJob manifest, a batch/v1 Job, or a v1 Pod "
    "(a v1 List of the Pods of one kueue.x-k8s.io/pod-group-name)"
)


def load_workload(path: Path | str) -> WorkloadSpec:
    """Read a workload file in any of the three accepted forms."""
    return workload_from_document(read_document(path), source=str(path))


def workload_from_document(doc: object, *, source: str) -> WorkloadSpec:
    """A Kueue Workload, a topoq job file or a HyperPod PyTorch job, told apart by their fields."""
    readers = {
        _KUEUE: workload_from_kueue,
        _JOB_FILE: workload_from_job_file,
        _HYPERPOD: workload_from_hyperpod_job,
        _TRAINING_JOB: workload_from_training_job,
        _BATCH_JOB: workload_from_batch_job,
        _POD_GROUP: workload_from_pod_group,
    }
    form = _form_of(doc)
    if form is not None:
        return readers[form](doc, source=source)
    if isinstance(doc, Mapping):
        kind, api_version = _header_value(doc, "kind"), _header_value(doc, "apiVersion")
        found = f"kind {kind!r} and apiVersion {api_version!r}"
    else:
        found = "no mapping"
    raise InvalidInputError(
        f"not a workload this version reads (found {found})",
        where=source,
        hint=f"give {_ACCEPTED_FORMS}",
    )


def is_job_document(doc: object) -> bool:
    """Whether ``doc`` is, by its fields, one of the job forms ``workload_from_document``
    reads (whether or not it reads without error)."""
    return _form_of(doc) is not None


def dependencies_from_document(doc: object, *, source: str) -> tuple[WrittenDependency, ...]:
    """The dependencies a document of any of the three forms names (none for another form)."""
    readers = {
        _KUEUE: dependencies_from_kueue,
        _JOB_FILE: dependencies_from_job_file,
        _HYPERPOD: dependencies_from_hyperpod_job,
    }
    form = _form_of(doc)
    return () if form is None or form not in readers else readers[form](doc, source=source)


_KUEUE, _JOB_FILE, _HYPERPOD = "kueue", "job file", "hyperpod"
_TRAINING_JOB, _BATCH_JOB, _POD_GROUP = "training job", "batch job", "pod group"


def _form_of(doc: object) -> str | None:
    """Which of the three forms the document is, by its fields; None for none of them."""
    if not isinstance(doc, Mapping):
        return None
    kind, api_version = _header_value(doc, "kind"), _header_value(doc, "apiVersion")
    if kind == WORKLOAD_KIND and api_version in KUEUE_WORKLOAD_API_VERSIONS:
        return _KUEUE
    if kind == JOB_KIND and api_version == JOB_API_VERSION:
        return _JOB_FILE
    if HYPERPOD_JOB_NAME_FIELD in doc:
        return _HYPERPOD
    if is_training_job(doc):
        return _TRAINING_JOB
    if is_batch_job(doc):
        return _BATCH_JOB
    if is_pod_group(doc):
        return _POD_GROUP
    return None


def _header_value(doc: Mapping[str, object], key: str) -> str | None:
    """``kind`` or ``apiVersion`` as written, or None when it is not a string."""
    value = doc.get(key)
    return value if isinstance(value, str) else None


def workload_from_job_file(doc: object, *, source: str) -> WorkloadSpec:
    """topoq's own job file (see the module documentation)."""
    try:
        return _job(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _job(fields: Fields) -> WorkloadSpec:
    reject_unknown_keys(fields, _TOP_KEYS)
    for key, expected in (("apiVersion", JOB_API_VERSION), ("kind", JOB_KIND)):
        if fields.text(key, "") != expected:
            raise InvalidInputError(
                f"expected {expected!r}, got {fields.text(key, '')!r}",
                where=fields.path(key),
                hint=f"a topoq job file has apiVersion {JOB_API_VERSION} and kind {JOB_KIND}",
            )
    metadata, spec = fields.mapping("metadata"), fields.mapping("spec")
    reject_unknown_keys(spec, _SPEC_KEYS)
    name = workload_name(metadata, "name")
    namespace = namespace_name(metadata, "namespace", DEFAULT_NAMESPACE)
    queue = optional_name(spec, spelling(spec, "queueName"), "queue name")
    priority_class = optional_name(spec, spelling(spec, "priorityClassName"), "priority class name")
    time_limit = optional_duration(spec, "timeLimit")
    pod_sets = tuple(_pod_set(record) for record in spec.records(spelling(spec, "podSets")))
    try:
        return WorkloadSpec(name, pod_sets, namespace, queue, priority_class, time_limit)
    except InvalidInputError as error:
        raise error.located(spec.path(spelling(spec, "podSets"))) from None


def _pod_set(record: Fields) -> PodSetSpec:
    reject_unknown_keys(record, _POD_SET_KEYS)
    name, count = pod_set_name(record, "name"), record.integer("count")
    requests = _requests(record)
    selector = record.string_map(spelling(record, "nodeSelector"))
    tolerated = tolerations(record)
    topology = _topology(record.mapping("topology"))
    command = argv(record, "command") + argv(record, "args")
    environment = record.string_map("environment")
    image = optional_image(record, "image")
    try:
        return PodSetSpec(
            name, count, requests, selector, (), tolerated, topology, command, environment, image
        )
    except InvalidInputError as error:
        raise error.located(record.where) from None


def _requests(record: Fields) -> Resources:
    requests_key, type_key = "requests", spelling(record, "instanceType")
    explicit = requests_with_gpu_shares(record.mapping(requests_key))
    if not record.has(type_key):
        if record.has("accelerators"):
            raise InvalidInputError(
                "accelerators are given without instanceType",
                where=record.path("accelerators"),
                hint="add instanceType, whose share of vCPUs and memory goes with them",
            )
        if not record.has(requests_key):
            raise InvalidInputError(
                "the pod set requests nothing",
                where=record.where,
                hint="add requests (e.g. {nvidia.com/gpu: 8}) or instanceType",
            )
        return explicit
    instance = known_instance_type(record.text(type_key), where=record.path(type_key))
    accelerators = record.integer("accelerators") if record.has("accelerators") else None
    if accelerators is not None and not 0 <= accelerators <= instance.accelerators:
        raise InvalidInputError(
            f"{accelerators} accelerators requested",
            where=record.path("accelerators"),
            hint=f"{instance.name} has {instance.accelerators}",
        )
    derived = instance_requests(instance, accelerators=accelerators)
    return Resources(dict(derived) | dict(explicit))


def _topology(fields: Fields) -> TopologyRequest:
    reject_unknown_keys(fields, _TOPOLOGY_KEYS)
    required, preferred = fields.optional_text("required"), fields.optional_text("preferred")
    if fields.boolean("unconstrained") and (required or preferred):
        raise InvalidInputError(
            "an unconstrained pod set cannot also require or prefer a level",
            where=fields.path("unconstrained"),
            hint="remove unconstrained, or remove required and preferred",
        )
    return TopologyRequest(
        required=required,
        preferred=preferred,
        slices=tuple(_slice(record) for record in fields.records("slices")),
        group=fields.optional_text("group"),
        spread=_spread(fields) if fields.has("spread") else None,
    )


def _slice(record: Fields) -> SliceConstraint:
    reject_unknown_keys(record, _SLICE_KEYS)
    return SliceConstraint(record.text("level"), record.integer("size"))


def _spread(fields: Fields) -> SpreadConstraint:
    spread = fields.mapping("spread")
    reject_unknown_keys(spread, _SPREAD_KEYS)
    maximum = spread.integer(spelling(spread, "maxPodsPerDomain"))
    return SpreadConstraint(spread.text("level"), maximum)
