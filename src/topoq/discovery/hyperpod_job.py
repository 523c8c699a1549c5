"""SageMaker HyperPod PyTorch jobs: the fields of ``hyp create hyp-pytorch-job`` (or its
``config.yaml``), read as one pod set.

In HyperPod a replica is one pod on one node, and ``tasks_per_node`` is the number of processes
*inside* each pod. So the pod set ``worker`` has ``replica_count`` (alias ``node_count``,
default 1) pods, and ``tasks_per_node`` does not change what is placed.

Requests are sized from ``instance_type`` as HyperPod sizes them (see
:mod:`topoq.discovery.instance_sizing`); ``memory`` is in GiB. Pods select nodes of the instance
type as written (``ml.p5.48xlarge`` on HyperPod), plus ``label_selector``, plus
``sagemaker.amazonaws.com/deep-health-check-status: Passed`` when
``deep_health_check_passed_nodes_only`` is true (below). HyperPod sets no tolerations;
the pods get those EKS's ExtendedResourceToleration admission plugin adds for the extended
resources they request (``nvidia.com/gpu`` …). ``command``/``args``, ``environment`` and
``image`` are what the pods run (the image by an executor that runs containers); the other
fields of the HyperPod CLI's job (``pull_policy``, ``volume``, the elastic-training fields, …)
are accepted and not used. A key that is none of these is refused
with the closest one (``did you mean 'node_count'?``), as the HyperPod CLI (whose job model
forbids extra fields) and topoq's own job file refuse it.

The deep health check: HyperPod labels each node ``sagemaker.amazonaws.com/deep-health-check-
status`` ``InProgress``, ``Passed`` or ``Failed`` (SageMaker HyperPod's "Resilience-related
Kubernetes labels" page). The HyperPod CLI up to 3.7 wrote ``deep-health-check-passed: "true"``
into the pods' nodeSelector instead, a label no node has (aws/sagemaker-hyperpod-cli issue
382); topoq selects the label HyperPod writes.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoq.discovery.documents import Fields, argv
from topoq.discovery.instance_sizing import instance_requests, known_instance_type
from topoq.discovery.instance_types import GIB, InstanceType
from topoq.discovery.job_dependencies import HYPERPOD_DEPENDENCY_KEYS
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    extended_resource_tolerations,
    namespace_name,
    optional_image,
    optional_name,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.names import DNS_LABEL_MAX, is_dns_label
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.domain.quantity import CPU, MEMORY, parse_quantity
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, AWS_ULTRASERVER_LABEL
from topoq.domain.workload import PodSetSpec, TopologyRequest, WorkloadSpec

HYPERPOD_POD_SET_NAME = "worker"
HYPERPOD_JOB_NAME_FIELD = "job_name"
DEEP_HEALTH_CHECK_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
DEEP_HEALTH_CHECK_PASSED = "Passed"
HYPERPOD_TOPOLOGY_LABELS = (*AWS_NETWORK_LAYER_LABELS[:3], AWS_ULTRASERVER_LABEL)
REPLICA_COUNT_FIELDS = ("replica_count", "node_count")
HYPERPOD_READ_FIELDS = (
    HYPERPOD_JOB_NAME_FIELD,
    "namespace",
    "command",
    "args",
    "environment",
    "image",
    "instance_type",
    *REPLICA_COUNT_FIELDS,
    "accelerators",
    "vcpu",
    "memory",
    "efa",
    "label_selector",
    "deep_health_check_passed_nodes_only",
    "queue_name",
    "priority",
    "max_retry",
    "preferred_topology",
    "required_topology",
    *HYPERPOD_DEPENDENCY_KEYS,
)
"""The fields topoq reads (``max_retry`` at submission, the ``after_*`` in job_dependencies)."""
HYPERPOD_UNUSED_FIELDS = (
    "pull_policy",
    "tasks_per_node",
    "scheduler_type",
    "accelerators_limit",
    "vcpu_limit",
    "memory_limit",
    "accelerator_partition_type",
    "accelerator_partition_count",
    "accelerator_partition_limit",
    "volume",
    "service_account_name",
    "elastic_replica_increment_step",
    "max_node_count",
    "elastic_graceful_shutdown_timeout_in_seconds",
    "elastic_scaling_timeout_in_seconds",
    "elastic_scale_up_snooze_time_in_seconds",
    "elastic_replica_discrete_values",
    "template",
    "version",
)
"""The HyperPod CLI's other job fields (its hyp-pytorch-job templates 1.0 and 1.1, and the
``template``/``version`` of the config.yaml ``hyp init`` writes): accepted, not used."""


def workload_from_hyperpod_job(doc: object, *, source: str) -> WorkloadSpec:
    """A HyperPod PyTorch job as a workload of one pod set, ``worker``."""
    try:
        return _workload(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _workload(fields: Fields) -> WorkloadSpec:
    fields.reject_unknown_keys(
        (*HYPERPOD_READ_FIELDS, *HYPERPOD_UNUSED_FIELDS),
        listed=(*HYPERPOD_READ_FIELDS, "and the HyperPod CLI's others (pull_policy, volume, …)"),
    )
    name = dns_label(fields, HYPERPOD_JOB_NAME_FIELD)
    topology = TopologyRequest(
        required=_topology_label(fields, "required_topology"),
        preferred=_topology_label(fields, "preferred_topology"),
    )
    requests = _requests(fields)
    pod_set = PodSetSpec(
        name=HYPERPOD_POD_SET_NAME,
        count=_replica_count(fields),
        requests=requests,
        node_selector=_node_selector(fields),
        tolerations=extended_resource_tolerations(requests),
        topology=topology,
        command=argv(fields, "command") + argv(fields, "args"),
        environment=fields.string_map("environment"),
        image=optional_image(fields, "image"),
    )
    return WorkloadSpec(
        name=name,
        pod_sets=(pod_set,),
        namespace=namespace_name(fields, "namespace", DEFAULT_NAMESPACE),
        queue=optional_name(fields, "queue_name", "queue name"),
        priority_class=optional_name(fields, "priority", "priority class name"),
    )


def dns_label(fields: Fields, key: str) -> str:
    """A Kubernetes DNS label (RFC 1123): at most 63 of a-z, 0-9 and '-', alphanumeric ends."""
    name = fields.text(key)
    if not is_dns_label(name):
        raise InvalidInputError(
            f"{name!r} is not a DNS label",
            where=fields.path(key),
            hint=f"use at most {DNS_LABEL_MAX} lowercase letters, digits and '-', "
            "starting and ending with a letter or digit",
        )
    return name


def _replica_count(fields: Fields) -> int:
    given = {key: fields.integer(key) for key in REPLICA_COUNT_FIELDS if fields.has(key)}
    if len(set(given.values())) > 1:
        raise InvalidInputError(
            f"replica_count ({given['replica_count']}) and node_count ({given['node_count']}) "
            "differ",
            where=fields.path("node_count"),
            hint="node_count is an alias of replica_count; give one of them",
        )
    if not given:
        return 1
    key, count = next(iter(given.items()))
    if count < 1:
        raise InvalidInputError(f"is {count}", where=fields.path(key), hint="use 1 or more")
    return count


def _topology_label(fields: Fields, key: str) -> str | None:
    label = fields.optional_text(key)
    if label is not None and label not in HYPERPOD_TOPOLOGY_LABELS:
        raise InvalidInputError(
            f"{label!r} is not a HyperPod topology label",
            where=fields.path(key),
            hint=f"use one of {', '.join(HYPERPOD_TOPOLOGY_LABELS)}",
        )
    return label


def _requests(fields: Fields) -> Resources:
    if not fields.has("instance_type"):
        raise InvalidInputError(
            "is missing",
            where=fields.path("instance_type"),
            hint="topoq sizes HyperPod pods from their instance type, e.g. ml.p5.48xlarge",
        )
    instance = known_instance_type(fields.text("instance_type"), where=fields.path("instance_type"))
    efa = fields.integer("efa") if fields.has("efa") else None
    return instance_requests(
        instance,
        accelerators=_accelerators(fields, instance),
        cpu_millis=_amount(fields, "vcpu", CPU, "", instance.vcpus * 1000),
        memory_bytes=_amount(fields, "memory", MEMORY, "Gi", instance.memory_gib * GIB),
        efa=efa,
    )


def _accelerators(fields: Fields, instance: InstanceType) -> int | None:
    if not fields.has("accelerators"):
        return None
    accelerators = fields.integer("accelerators")
    if not 0 <= accelerators <= instance.accelerators:
        raise InvalidInputError(
            f"{accelerators} accelerators requested",
            where=fields.path("accelerators"),
            hint=f"{instance.name} has {instance.accelerators} ({instance.accelerator_resource})",
        )
    return accelerators


def _amount(fields: Fields, key: str, resource: str, unit: str, capacity: int) -> int | None:
    """An optional number of vCPUs or GiB, in canonical units, at most the instance's capacity."""
    if not fields.has(key):
        return None
    value = fields.raw(key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInputError(f"expected a number, got {value!r}", where=fields.path(key))
    try:
        amount = parse_quantity(resource, f"{value}{unit}")
    except InvalidInputError as error:
        raise error.located(fields.path(key)) from None
    if amount > capacity:
        raise InvalidInputError(
            f"{value} is more than the instance has",
            where=fields.path(key),
            hint=f"the instance type has {Resources({resource: capacity}).formatted()[resource]}",
        )
    return amount


def _node_selector(fields: Fields) -> dict[str, str]:
    selector = {INSTANCE_TYPE_LABEL: fields.text("instance_type")}
    wanted = list(_label_selector(fields).items())
    if fields.boolean("deep_health_check_passed_nodes_only"):
        wanted.append((DEEP_HEALTH_CHECK_LABEL, DEEP_HEALTH_CHECK_PASSED))
    for key, value in wanted:
        if selector.setdefault(key, value) != value:
            raise InvalidInputError(
                f"label {key!r} is selected as {selector[key]!r} and as {value!r}",
                where=fields.path("label_selector"),
                hint="select each label once",
            )
    return selector


def _label_selector(fields: Fields) -> dict[str, str]:
    """A mapping, a list of ``key=value`` strings, or one ``key=value,key=value`` string."""
    raw = fields.raw("label_selector")
    if raw is None or isinstance(raw, Mapping):
        return fields.string_map("label_selector")
    pairs = raw.split(",") if isinstance(raw, str) else fields.items("label_selector")
    selector: dict[str, str] = {}
    for index, pair in enumerate(pairs):
        key, equals, value = str(pair).partition("=")
        if not isinstance(pair, str) or not equals or not key.strip():
            raise InvalidInputError(
                f"expected key=value, got {pair!r}",
                where=f"{fields.path('label_selector')}[{index}]",
                hint="write each label as key=value",
            )
        selector[key.strip()] = value.strip()
    return selector
