"""topoq job files, HyperPod PyTorch jobs, instance sizing and telling workload forms apart."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from topoq.discovery.documents import read_document
from topoq.discovery.hyperpod_job import DEEP_HEALTH_CHECK_LABEL
from topoq.discovery.instance_sizing import (
    cpu_reservation_millis,
    instance_requests,
    max_allocatable_cpu_millis,
    max_allocatable_memory_bytes,
    memory_reservation_gib,
)
from topoq.discovery.instance_types import INSTANCE_TYPES, InstanceType
from topoq.discovery.jobfile import (
    load_workload,
    workload_from_document,
    workload_from_hyperpod_job,
    workload_from_job_file,
)
from topoq.discovery.kubernetes import nodes_from_nodelist
from topoq.domain.errors import InvalidInputError, InvalidRequestError
from topoq.domain.resources import Resources
from topoq.domain.workload import (
    SliceConstraint,
    SpreadConstraint,
    Toleration,
    TolerationOperator,
    TopologyRequest,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKLOADS = EXAMPLES / "workloads"
L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
GIB = 2**30
TIB = 2**40
P5 = INSTANCE_TYPES["p5.48xlarge"]
P5_MAX_CPU = 179_970  # 192 vCPUs less HyperPod's reservation of 12.03
P5_MAX_MEMORY = int(Decimal("1890.26") * GIB)  # 2048 GiB less 157.74 GiB
GPU_TOLERATION = Toleration("nvidia.com/gpu", TolerationOperator.EXISTS, effect="NoSchedule")


def job_document(**pod_set: Any) -> dict[str, Any]:
    entry = {"name": "workers", "count": 4, "requests": {"nvidia.com/gpu": 8}, **pod_set}
    return {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {"podSets": [entry]},
    }


def hyperpod_document(**fields: Any) -> dict[str, Any]:
    document = {"job_name": "train", "image": "img:1", "instance_type": "ml.p5.48xlarge"}
    document.update(fields)
    return {key: value for key, value in document.items() if value is not None}


# --- every example ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("*.yaml")), ids=lambda path: Path(path).name)
def test_every_example_workload_loads(path: Path) -> None:
    workload = load_workload(path)

    assert workload.pod_sets
    assert all(pod_set.requests for pod_set in workload.pod_sets)


def test_every_example_pod_set_fits_on_an_example_node() -> None:
    nodes = nodes_from_nodelist(
        read_document(EXAMPLES / "kubernetes" / "nodes.json"), source="nodes.json"
    )
    for path in sorted(WORKLOADS.glob("*.yaml")):
        for pod_set in load_workload(path).pod_sets:
            assert pod_set.requests.fits_in(nodes[0].allocatable), (path.name, pod_set.name)


# --- topoq job file --------------------------------------------------------------------------


def test_the_example_job_file_reads_every_pod_set() -> None:
    workload = load_workload(WORKLOADS / "llama-70b-job.yaml")

    launcher, workers, evaluators = workload.pod_sets
    assert (workload.name, workload.namespace) == ("llama-70b", "hyperpod-ns-nlp")
    assert (workload.queue, workload.priority_class) == (
        "hyperpod-ns-nlp-localqueue",
        "training-priority",
    )
    assert launcher.topology == TopologyRequest(required=L1, group="llama")
    assert workers.count == 16
    assert workers.requests == Resources(
        {"nvidia.com/gpu": 8, "cpu": 96_000, "memory": TIB, "vpc.amazonaws.com/efa": 32}
    )
    assert workers.node_selector == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    assert workers.tolerations == (GPU_TOLERATION,)
    assert workers.topology == TopologyRequest(
        required=L1, preferred=L2, slices=(SliceConstraint(L3, 4),), group="llama"
    )
    assert evaluators.requests == Resources({"nvidia.com/gpu": 4, "cpu": 96_000, "memory": TIB})
    assert evaluators.topology == TopologyRequest(spread=SpreadConstraint(L3, 1))


@pytest.mark.parametrize(
    ("pod_set", "expected"),
    [
        pytest.param(
            {"requests": {"cpu": "500m", "memory": "2Gi"}},
            {"cpu": 500, "memory": 2 * GIB},
            id="requests as quantities",
        ),
        pytest.param(
            {"requests": None, "instanceType": "p5.48xlarge"},
            {"nvidia.com/gpu": 8, "cpu": P5_MAX_CPU, "memory": P5_MAX_MEMORY},
            id="the whole instance, capped at what it can allocate",
        ),
        pytest.param(
            {"requests": None, "instanceType": "ml.p5.48xlarge", "accelerators": 2},
            {"nvidia.com/gpu": 2, "cpu": 48_000, "memory": 512 * GIB},
            id="a share of the instance",
        ),
        pytest.param(
            {"requests": {"cpu": 10}, "instance_type": "p5.48xlarge", "accelerators": 4},
            {"nvidia.com/gpu": 4, "cpu": 10_000, "memory": TIB},
            id="requests override what the instance type derives",
        ),
    ],
)
def test_job_file_pod_set_requests(pod_set: dict[str, Any], expected: dict[str, int]) -> None:
    document = job_document(**pod_set)
    document["spec"]["podSets"][0] = {
        key: value for key, value in document["spec"]["podSets"][0].items() if value is not None
    }

    workload = workload_from_job_file(document, source="job.yaml")

    assert workload.pod_sets[0].requests == Resources(expected)


def test_snake_case_keys_are_accepted() -> None:
    document = job_document(
        node_selector={"a": "b"},
        topology={"required": L2, "spread": {"level": L3, "max_pods_per_domain": 2}},
    )
    document["spec"]["queue_name"] = "q"
    document["spec"]["pod_sets"] = document["spec"].pop("podSets")

    workload = workload_from_job_file(document, source="job.yaml")

    assert workload.queue == "q"
    assert workload.pod_sets[0].node_selector == {"a": "b"}
    assert workload.pod_sets[0].topology == TopologyRequest(
        required=L2, spread=SpreadConstraint(L3, 2)
    )


MALFORMED_JOBS = [
    pytest.param(
        {"count": None}, InvalidInputError, "spec.podSets[0].count", "missing", id="missing count"
    ),
    pytest.param(
        {"count": 0}, InvalidRequestError, "spec.podSets[0]", "count is 0", id="count zero"
    ),
    pytest.param(
        {"requests": {"memory": "lots"}},
        InvalidInputError,
        "spec.podSets[0].requests.memory",
        "'lots'",
        id="bad quantity",
    ),
    pytest.param(
        {"topolgy": {"required": L2}},
        InvalidInputError,
        "spec.podSets[0].topolgy",
        "did you mean 'topology'",
        id="unknown key",
    ),
    pytest.param(
        {"nodeSelector": {"a": "b"}, "node_selector": {"a": "c"}},
        InvalidInputError,
        "spec.podSets[0]",
        "both 'nodeSelector' and 'node_selector'",
        id="both spellings",
    ),
    pytest.param(
        {"requests": None, "instanceType": "p9.huge"},
        InvalidInputError,
        "spec.podSets[0].instanceType",
        "p5.48xlarge",
        id="unknown instance type lists known ones",
    ),
    pytest.param(
        {"accelerators": 4},
        InvalidInputError,
        "spec.podSets[0].accelerators",
        "without instanceType",
        id="accelerators without instance type",
    ),
    pytest.param(
        {"instanceType": "p5.48xlarge", "accelerators": 9},
        InvalidInputError,
        "spec.podSets[0].accelerators",
        "p5.48xlarge has 8",
        id="more accelerators than the instance has",
    ),
    pytest.param(
        {"requests": None},
        InvalidInputError,
        "spec.podSets[0]",
        "requests nothing",
        id="no requests",
    ),
    pytest.param(
        {"topology": {"required": L2, "unconstrained": True}},
        InvalidInputError,
        "spec.podSets[0].topology.unconstrained",
        "unconstrained",
        id="unconstrained and required",
    ),
    pytest.param(
        {"topology": {"slices": [{"level": L3}]}},
        InvalidInputError,
        "spec.podSets[0].topology.slices[0].size",
        "missing",
        id="slice without size",
    ),
    pytest.param(
        {"topology": {"slices": [{"level": L3, "size": 3}]}},
        InvalidRequestError,
        "spec.podSets[0]",
        "does not divide",
        id="slice size not dividing the count",
    ),
    pytest.param(
        {"topology": {"spread": {"level": L3}}},
        InvalidInputError,
        "spec.podSets[0].topology.spread.maxPodsPerDomain",
        "missing",
        id="spread without maximum",
    ),
    pytest.param(
        {"tolerations": [{"key": "k", "effect": "Sometimes"}]},
        InvalidInputError,
        "spec.podSets[0].tolerations[0].effect",
        "NoSchedule",
        id="unknown toleration effect",
    ),
]


@pytest.mark.parametrize(("pod_set", "error_type", "path", "message"), MALFORMED_JOBS)
def test_a_malformed_job_file_is_rejected_naming_the_file_and_the_field(
    pod_set: dict[str, Any], error_type: type[Exception], path: str, message: str
) -> None:
    document = job_document(**pod_set)
    entry = document["spec"]["podSets"][0]
    document["spec"]["podSets"][0] = {k: v for k, v in entry.items() if v is not None}

    with pytest.raises(error_type) as caught:
        workload_from_job_file(document, source="job.yaml")

    text = str(caught.value)
    assert text.startswith(f"job.yaml: {path}")
    assert message in text


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("kind", "Cluster", "'Job'"), ("apiVersion", "topoq.io/v2", "'topoq.io/v1'")],
)
def test_a_job_file_with_the_wrong_header_is_rejected(key: str, value: str, message: str) -> None:
    document = job_document()
    document[key] = value

    with pytest.raises(InvalidInputError, match=f"^job.yaml: {key}: expected {message}"):
        workload_from_job_file(document, source="job.yaml")


# --- HyperPod PyTorch job --------------------------------------------------------------------


def test_the_example_hyperpod_job_is_one_pod_set_per_replica() -> None:
    workload = load_workload(WORKLOADS / "hyperpod-pytorch-job.yaml")

    [worker] = workload.pod_sets
    assert (workload.name, workload.namespace) == ("llama3-finetune", "hyperpod-ns-nlp")
    assert (workload.queue, workload.priority_class) == (
        "hyperpod-ns-nlp-localqueue",
        "training-priority",
    )
    assert (worker.name, worker.count) == ("worker", 8)  # node_count, not × tasks_per_node
    assert worker.requests == Resources(
        {
            "nvidia.com/gpu": 8,
            "cpu": P5_MAX_CPU,
            "memory": P5_MAX_MEMORY,
            "vpc.amazonaws.com/efa": 32,
        }
    )
    assert worker.node_selector == {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
        DEEP_HEALTH_CHECK_LABEL: "Passed",
    }
    assert worker.topology == TopologyRequest(required=L3)
    assert GPU_TOLERATION in worker.tolerations


@pytest.mark.parametrize(
    ("fields", "count"),
    [
        ({}, 1),
        ({"replica_count": 4}, 4),
        ({"node_count": 6}, 6),
        ({"replica_count": 3, "node_count": 3}, 3),
    ],
)
def test_hyperpod_pod_count_is_the_replica_count(fields: dict[str, Any], count: int) -> None:
    workload = workload_from_hyperpod_job(hyperpod_document(tasks_per_node=8, **fields), source="j")

    assert workload.pod_sets[0].count == count


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {},
            {"nvidia.com/gpu": 8, "cpu": P5_MAX_CPU, "memory": P5_MAX_MEMORY},
            id="only instance_type: the whole instance",
        ),
        pytest.param(
            {"accelerators": 4},
            {"nvidia.com/gpu": 4, "cpu": 96_000, "memory": TIB},
            id="only accelerators: vCPU and memory in proportion",
        ),
        pytest.param(
            {"accelerators": 2, "vcpu": 10.5, "memory": 100, "efa": 8},
            {"nvidia.com/gpu": 2, "cpu": 10_500, "memory": 100 * GIB, "vpc.amazonaws.com/efa": 8},
            id="everything given",
        ),
        pytest.param(
            {"memory": 512},
            {"cpu": 48_000, "memory": 512 * GIB},
            id="only memory: vCPU in proportion",
        ),
        pytest.param(
            {"vcpu": 192}, {"cpu": P5_MAX_CPU, "memory": P5_MAX_MEMORY}, id="capped at allocatable"
        ),
    ],
)
def test_hyperpod_requests_follow_hyperpods_sizing(
    fields: dict[str, Any], expected: dict[str, int]
) -> None:
    workload = workload_from_hyperpod_job(hyperpod_document(**fields), source="j")

    assert workload.pod_sets[0].requests == Resources(expected)


@pytest.mark.parametrize(
    "label_selector",
    [{"team": "nlp", "tier": "a"}, ["team=nlp", "tier=a"], "team=nlp,tier=a"],
    ids=["mapping", "list", "string"],
)
def test_hyperpod_label_selector_merges_into_the_node_selector(label_selector: object) -> None:
    workload = workload_from_hyperpod_job(
        hyperpod_document(label_selector=label_selector), source="j"
    )

    assert workload.pod_sets[0].node_selector == {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
        "team": "nlp",
        "tier": "a",
    }


def test_hyperpod_preferred_and_required_topology_are_carried() -> None:
    document = hyperpod_document(
        preferred_topology="topology.k8s.aws/ultraserver-id", required_topology=L2
    )

    topology = workload_from_hyperpod_job(document, source="j").pod_sets[0].topology

    assert topology == TopologyRequest(required=L2, preferred="topology.k8s.aws/ultraserver-id")


MALFORMED_HYPERPOD_JOBS = [
    pytest.param({"job_name": "Train_Job"}, "job_name", "not a DNS label", id="uppercase and _"),
    pytest.param({"job_name": "x" * 64}, "job_name", "at most 63", id="too long"),
    pytest.param({"job_name": "-train"}, "job_name", "not a DNS label", id="leading dash"),
    pytest.param({"job_name": None}, "job_name", "missing", id="no job name"),
    pytest.param(
        {"instance_type": "ml.p9.huge"},
        "instance_type",
        "p5.48xlarge",
        id="unknown instance type lists known ones",
    ),
    pytest.param({"instance_type": None}, "instance_type", "missing", id="no instance type"),
    pytest.param(
        {"required_topology": "topology.kubernetes.io/zone"},
        "required_topology",
        "topology.k8s.aws/ultraserver-id",
        id="topology label not allowed",
    ),
    pytest.param({"accelerators": 16}, "accelerators", "has 8", id="too many accelerators"),
    pytest.param({"vcpu": 500}, "vcpu", "more than the instance has", id="too many vCPUs"),
    pytest.param({"memory": "lots"}, "memory", "not a Kubernetes quantity", id="bad memory"),
    pytest.param(
        {"replica_count": 2, "node_count": 3}, "node_count", "differ", id="count and alias differ"
    ),
    pytest.param({"node_count": 0}, "node_count", "is 0", id="zero nodes"),
    pytest.param({"label_selector": ["team"]}, "label_selector[0]", "key=value", id="bad label"),
    pytest.param(
        {
            "label_selector": {DEEP_HEALTH_CHECK_LABEL: "Failed"},
            "deep_health_check_passed_nodes_only": True,
        },
        "label_selector",
        "selected as 'Failed' and as 'Passed'",
        id="conflicting labels",
    ),
]


@pytest.mark.parametrize(("fields", "path", "message"), MALFORMED_HYPERPOD_JOBS)
def test_a_malformed_hyperpod_job_is_rejected_naming_the_file_and_the_field(
    fields: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        workload_from_hyperpod_job(hyperpod_document(**fields), source="hyp.yaml")

    text = str(caught.value)
    assert text.startswith(f"hyp.yaml: {path}")
    assert message in text


# --- instance sizing -------------------------------------------------------------------------


def test_hyperpods_reservation_for_a_p5() -> None:
    assert cpu_reservation_millis(192) == 12_030
    assert memory_reservation_gib(2048) == Decimal("157.74")
    assert max_allocatable_cpu_millis(P5) == P5_MAX_CPU
    assert max_allocatable_memory_bytes(P5) == P5_MAX_MEMORY


@pytest.mark.parametrize("instance", [INSTANCE_TYPES[name] for name in sorted(INSTANCE_TYPES)])
def test_a_whole_instance_pod_never_asks_more_than_the_instance_has(
    instance: InstanceType,
) -> None:
    requests = instance_requests(instance)

    assert 0 < requests.amount("cpu") < instance.vcpus * 1000
    assert 0 < requests.amount("memory") < instance.memory_gib * GIB
    assert requests.amount(instance.accelerator_resource) == instance.accelerators


# --- telling the forms apart -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("required-block.yaml", "gpt-block-8"),
        ("llama-70b-job.yaml", "llama-70b"),
        ("hyperpod-pytorch-job.yaml", "llama3-finetune"),
    ],
)
def test_workload_from_document_tells_the_three_forms_apart(file: str, name: str) -> None:
    document = read_document(WORKLOADS / file)

    assert workload_from_document(document, source=file).name == name


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "j"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology"},
        ["job_name"],
        "job_name: x",
    ],
    ids=["a Kubernetes Deployment", "a Kueue Topology", "a list", "a string"],
)
def test_an_unrecognised_document_names_the_three_accepted_forms(document: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        workload_from_document(document, source="what.yaml")

    text = str(caught.value)
    assert text.startswith("what.yaml: ")
    for form in ("Kueue Workload", "topoq job file", "HyperPod PyTorch job", "batch/v1 Job"):
        assert form in text


def test_load_workload_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: topoq.io/v1\nkind: Job\nmetadata: {name: j}\n"
        "spec:\n  podSets:\n  - {name: w}\n"
    )

    with pytest.raises(
        InvalidInputError, match=r"job\.yaml: spec\.podSets\[0\]\.count: is missing"
    ):
        load_workload(path)


@pytest.mark.parametrize(
    ("document", "where", "guess"),
    [
        (hyperpod_document(node_cont=2), "node_cont", "'node_count'"),
        (hyperpod_document(priorty="training-priority"), "priorty", "'priority'"),
    ],
)
def test_an_unknown_hyperpod_field_is_refused_with_the_closest_as_a_job_file_key_is(
    document: dict[str, Any], where: str, guess: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        workload_from_hyperpod_job(document, source="job.yaml")
    assert raised.value.where == f"job.yaml: {where}"
    assert raised.value.message == f"unknown key {where!r}"
    assert (raised.value.hint or "").startswith(f"did you mean {guess}? allowed keys: job_name")


def test_the_hyperpod_clis_fields_topoq_does_not_use_are_accepted() -> None:
    unused = {"pull_policy": "Always", "volume": [], "max_node_count": 4, "template": "x"}
    workload = workload_from_hyperpod_job(hyperpod_document(**unused), source="job.yaml")
    assert workload.name == "train"
