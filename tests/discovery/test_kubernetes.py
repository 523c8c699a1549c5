"""Kubernetes NodeList / PodList, Kueue Topology and Workload reading, and the exports."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topoq.discovery.documents import parse_document, read_document
from topoq.discovery.kubernetes import (
    kueue_topology_document,
    node_label_commands,
    nodelist_document,
    nodes_from_nodelist,
    topology_from_kueue,
    usage_from_podlist,
    workload_from_kueue,
)
from topoq.discovery.kubernetes_workload import (
    GROUP_NAME_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_CONSTRAINTS_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    SPREAD_MAX_PODS_ANNOTATION,
    SPREAD_TOPOLOGY_ANNOTATION,
    UNCONSTRAINED_TOPOLOGY_ANNOTATION,
)
from topoq.domain.errors import InvalidInputError, InvalidRequestError, TopologyError
from topoq.domain.node import NodeName, NodeSpec, Taint, TaintEffect
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import (
    SelectorOperator,
    SliceConstraint,
    SpreadConstraint,
    Toleration,
    TolerationOperator,
    TopologyRequest,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KUBERNETES = EXAMPLES / "kubernetes"
WORKLOADS = EXAMPLES / "workloads"
L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOST = "kubernetes.io/hostname"
GIB = 2**30
SOURCE = "input.yaml"


def node_document(name: str = "n1", **overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, L3: "nn-3a"}, "uid": "ignored"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "191450m", "memory": "2060000Mi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.31"},
        },
    }
    document.update(overrides)
    return document


def pod_document(
    node: str | None = "n1", phase: str | None = "Running", **spec: Any
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [container({"cpu": "1"})], **spec}
    if node is not None:
        pod_spec["nodeName"] = node
    status = {"phase": phase} if phase is not None else {}
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec, "status": status}


def container(requests: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "i", "resources": {"requests": requests}, **extra}


def workload_document(
    annotations: dict[str, str] | None = None, count: int = 8, **pod_set: Any
) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [container({"nvidia.com/gpu": "8", "cpu": "96"})]},
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {"podSets": [{"name": "workers", "count": count, "template": template, **pod_set}]},
    }


# --- nodes -----------------------------------------------------------------------------------


def test_example_nodelist_reads_every_node_with_health_and_allocatable() -> None:
    nodes = nodes_from_nodelist(read_document(KUBERNETES / "nodes.json"), source="nodes.json")

    by_name = {str(node.name): node for node in nodes}
    assert len(nodes) == 32
    assert [name for name, node in by_name.items() if not node.ready] == [
        "ip-10-1-2-18.ec2.internal"
    ]
    assert [name for name, node in by_name.items() if node.unschedulable] == [
        "ip-10-1-4-18.ec2.internal"
    ]
    first = by_name["ip-10-1-1-11.ec2.internal"]
    assert first.schedulable
    assert first.labels[L3] == "nn-3a"
    assert first.allocatable.amount("cpu") == 191_450
    assert first.allocatable.amount("memory") == 2_060_000 * 2**20
    assert first.allocatable.amount("nvidia.com/gpu") == 8
    assert first.allocatable.amount("pods") == 110
    assert Taint("nvidia.com/gpu", TaintEffect.NO_SCHEDULE, "true") in first.taints


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda items: {"kind": "NodeList", "items": items}, id="NodeList"),
        pytest.param(lambda items: {"apiVersion": "v1", "kind": "List", "items": items}, id="List"),
        pytest.param(lambda items: items[0], id="single Node"),
    ],
)
def test_nodes_are_read_from_a_nodelist_a_list_or_a_single_node(
    wrap: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> None:
    nodes = nodes_from_nodelist(wrap([node_document("n1")]), source=SOURCE)

    assert [node.name for node in nodes] == ["n1"]


@pytest.mark.parametrize(
    ("status", "ready"),
    [
        ({"conditions": [{"type": "Ready", "status": "True"}]}, True),
        ({"conditions": [{"type": "Ready", "status": "False"}]}, False),
        ({"conditions": [{"type": "Ready", "status": "Unknown"}]}, False),
        ({"conditions": [{"type": "MemoryPressure", "status": "False"}]}, False),
        ({}, False),
    ],
)
def test_a_node_is_ready_only_when_its_ready_condition_is_true(
    status: dict[str, Any], ready: bool
) -> None:
    [node] = nodes_from_nodelist(node_document(status=status), source=SOURCE)

    assert node.ready is ready


def test_capacity_stands_in_when_allocatable_is_absent() -> None:
    status = {"capacity": {"cpu": "8", "memory": "16Gi"}, "conditions": []}

    [node] = nodes_from_nodelist(node_document(status=status), source=SOURCE)

    assert node.allocatable == Resources({"cpu": 8000, "memory": 16 * GIB, "pods": 110})


def test_a_cordoned_node_is_not_schedulable() -> None:
    [node] = nodes_from_nodelist(node_document(spec={"unschedulable": True}), source=SOURCE)

    assert node.unschedulable
    assert not node.schedulable


def test_nodelist_document_reads_back_as_the_same_nodes() -> None:
    example = nodes_from_nodelist(read_document(KUBERNETES / "nodes.json"), source="nodes.json")
    crafted = [
        NodeSpec(
            NodeName("odd"),
            labels={L1: "a", HOST: "odd"},
            allocatable=Resources({"cpu": 1500, "memory": 3 * 10**9, "pods": 7}),
            taints=(
                Taint("dedicated", TaintEffect.NO_EXECUTE),
                Taint("x", TaintEffect.PREFER_NO_SCHEDULE, "y"),
            ),
            unschedulable=True,
            ready=False,
        )
    ]
    for nodes in (example, crafted):
        text = json.dumps(nodelist_document(nodes))

        assert nodes_from_nodelist(parse_document(text, source="out.json"), source="out") == nodes


# --- pods ------------------------------------------------------------------------------------


def test_example_podlist_counts_running_and_bound_pending_pods_only() -> None:
    usage = usage_from_podlist(read_document(KUBERNETES / "pods.json"), source="pods.json")

    assert sorted(usage) == [
        "ip-10-1-1-12.ec2.internal",
        "ip-10-1-3-11.ec2.internal",
        "ip-10-1-3-12.ec2.internal",
        "ip-10-1-4-11.ec2.internal",
    ]
    assert usage["ip-10-1-3-11.ec2.internal"].amount("nvidia.com/gpu") == 8
    assert usage["ip-10-1-3-12.ec2.internal"].amount("cpu") == 120_000  # its init container
    assert usage["ip-10-1-4-11.ec2.internal"].amount("nvidia.com/gpu") == 2
    assert all(resources.amount("pods") == 1 for resources in usage.values())


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [container({"cpu": "1", "memory": "1Gi"}), container({"cpu": "500m"})]},
            {"cpu": 1500, "memory": GIB},
            id="containers add up",
        ),
        pytest.param(
            {
                "containers": [container({"cpu": "1", "memory": "4Gi"})],
                "initContainers": [container({"cpu": "3"}), container({"memory": "2Gi"})],
            },
            {"cpu": 3000, "memory": 4 * GIB},
            id="the largest init container wins per resource",
        ),
        pytest.param(
            {
                "containers": [container({"cpu": "1"})],
                "initContainers": [
                    container({"cpu": "2"}, restartPolicy="Always"),
                    container({"cpu": "2"}),
                ],
            },
            {"cpu": 4000},
            id="a sidecar runs beside later init containers and the main ones",
        ),
        pytest.param(
            {"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}},
            {"cpu": 1250},
            id="pod overhead is added",
        ),
        pytest.param({"containers": [{"name": "c"}]}, {}, id="no requests"),
    ],
)
def test_a_pod_holds_its_effective_request_and_one_pod_slot(
    spec: dict[str, Any], expected: dict[str, int]
) -> None:
    usage = usage_from_podlist(pod_document(**spec), source=SOURCE)

    assert usage == {"n1": Resources({**expected, "pods": 1})}


@pytest.mark.parametrize(
    ("phase", "holds"),
    [("Running", True), ("Pending", True), (None, True), ("Succeeded", False), ("Failed", False)],
)
def test_only_unfinished_pods_hold_resources(phase: str | None, holds: bool) -> None:
    usage = usage_from_podlist(
        {"kind": "PodList", "items": [pod_document(phase=phase)]}, source=SOURCE
    )

    assert ("n1" in usage) is holds


def test_pods_add_up_per_node_and_unbound_pods_hold_nothing() -> None:
    pods = [pod_document("n1"), pod_document("n1"), pod_document(None, "Pending")]

    usage = usage_from_podlist({"kind": "List", "items": pods}, source=SOURCE)

    assert usage == {"n1": Resources({"cpu": 2000, "pods": 2})}


# --- Kueue Topology --------------------------------------------------------------------------


def test_example_kueue_topology_reads_its_levels() -> None:
    topology = topology_from_kueue(read_document(KUBERNETES / "topology.yaml"), source="t.yaml")

    assert topology == TopologySpec("aws-p5", (L1, L2, L3, HOST))


@pytest.mark.parametrize(
    "api_version", ["kueue.x-k8s.io/v1alpha1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"]
)
def test_kueue_topology_round_trips_in_every_supported_version(api_version: str) -> None:
    topology = TopologySpec("aws", (L1, L2, HOST))

    document = kueue_topology_document(topology, api_version=api_version)

    assert document["apiVersion"] == api_version
    assert topology_from_kueue(document, source=SOURCE) == topology
    assert topology_from_kueue({"kind": "List", "items": [document]}, source=SOURCE) == topology


def test_kueue_topology_document_rejects_an_unknown_version() -> None:
    with pytest.raises(InvalidInputError, match="v1beta1"):
        kueue_topology_document(TopologySpec("t", (HOST,)), api_version="kueue.x-k8s.io/v9")


def test_node_label_commands_label_every_level_but_the_hostname() -> None:
    nodes = [
        NodeSpec(NodeName("n1"), labels={L1: "a", L2: "b", HOST: "n1", "other": "x"}),
        NodeSpec(NodeName("n2"), labels={HOST: "n2"}),
    ]

    commands = node_label_commands(nodes, TopologySpec("t", (L1, L2, HOST)))

    assert commands == [f"kubectl label node n1 {L1}=a {L2}=b --overwrite"]


def test_example_nodes_get_one_label_command_each() -> None:
    nodes = nodes_from_nodelist(read_document(KUBERNETES / "nodes.json"), source="nodes.json")
    topology = topology_from_kueue(read_document(KUBERNETES / "topology.yaml"), source="t")

    commands = node_label_commands(nodes, topology)

    assert len(commands) == 32
    assert commands[0] == (
        f"kubectl label node ip-10-1-1-11.ec2.internal {L1}=nn-1a {L2}=nn-2a {L3}=nn-3a --overwrite"
    )


# --- Kueue Workload --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("required-block.yaml", [TopologyRequest(required=L3)]),
        ("preferred-block.yaml", [TopologyRequest(preferred=L3)]),
        ("unconstrained.yaml", [TopologyRequest()]),
        ("required-and-preferred.yaml", [TopologyRequest(required=L2, preferred=L3)]),
        ("slices-one-layer.yaml", [TopologyRequest(required=L1, slices=(SliceConstraint(L3, 4),))]),
        (
            "slices-two-layers.yaml",
            [TopologyRequest(required=L1, slices=(SliceConstraint(L2, 8), SliceConstraint(L3, 4)))],
        ),
        (
            "group-launcher-workers.yaml",
            [
                TopologyRequest(required=L2, group="llama"),
                TopologyRequest(required=L2, slices=(SliceConstraint(L3, 4),), group="llama"),
            ],
        ),
        ("spread.yaml", [TopologyRequest(required=L1, spread=SpreadConstraint(L3, 2))]),
    ],
)
def test_example_kueue_workloads_carry_their_topology_requests(
    file: str, expected: list[TopologyRequest]
) -> None:
    workload = workload_from_kueue(read_document(WORKLOADS / file), source=file)

    assert [pod_set.topology for pod_set in workload.pod_sets] == expected


def test_a_kueue_workload_carries_names_queue_priority_requests_and_constraints() -> None:
    workload = workload_from_kueue(
        read_document(WORKLOADS / "group-launcher-workers.yaml"), source="w.yaml"
    )

    launcher, workers = workload.pod_sets
    assert (workload.name, workload.namespace) == ("llama-pretrain", "hyperpod-ns-nlp")
    assert workload.queue == "hyperpod-ns-nlp-localqueue"
    assert workload.priority_class == "training-priority"
    assert (launcher.name, launcher.count, workers.count) == ("launcher", 1, 12)
    assert launcher.requests == Resources({"cpu": 2000, "memory": 8 * GIB})
    assert workers.requests == Resources({"nvidia.com/gpu": 8, "cpu": 96_000, "memory": 2**40})
    assert workers.node_selector == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    assert workers.tolerations == (
        Toleration("nvidia.com/gpu", TolerationOperator.EXISTS, effect="NoSchedule"),
    )


def test_a_v1beta2_workload_names_its_priority_class_in_priority_class_ref() -> None:
    workload = workload_from_kueue(read_document(WORKLOADS / "preferred-block.yaml"), source="w")

    assert workload.priority_class == "training-priority"


def test_required_node_affinity_becomes_selector_terms() -> None:
    workload = workload_from_kueue(read_document(WORKLOADS / "spread.yaml"), source="w")

    [term] = workload.pod_sets[0].affinity_terms
    [requirement] = term.requirements
    assert requirement.key == "sagemaker.amazonaws.com/node-health-status"
    assert requirement.operator is SelectorOperator.IN
    assert requirement.values == ("Schedulable",)


@pytest.mark.parametrize(
    ("topology_request", "expected"),
    [
        ({"required": L2, "podSetGroupName": "g"}, TopologyRequest(required=L2, group="g")),
        ({"unconstrained": True}, TopologyRequest()),
        (
            {"preferred": L2, "podSetSliceRequiredTopology": L3, "podSetSliceSize": 4},
            TopologyRequest(preferred=L2, slices=(SliceConstraint(L3, 4),)),
        ),
        (
            {
                "required": L1,
                "podsetSliceRequiredTopologyConstraints": [
                    {"topology": L2, "size": 4},
                    {"topology": L3, "size": 2},
                ],
            },
            TopologyRequest(required=L1, slices=(SliceConstraint(L2, 4), SliceConstraint(L3, 2))),
        ),
    ],
)
def test_the_topology_request_kueue_records_is_read_when_no_annotation_is_set(
    topology_request: dict[str, Any], expected: TopologyRequest
) -> None:
    document = workload_document(topologyRequest=topology_request)

    assert workload_from_kueue(document, source=SOURCE).pod_sets[0].topology == expected


def test_annotations_win_over_the_recorded_topology_request() -> None:
    document = workload_document(
        {REQUIRED_TOPOLOGY_ANNOTATION: L3}, topologyRequest={"required": L1}
    )

    assert workload_from_kueue(document, source=SOURCE).pod_sets[0].topology.required == L3


def test_constraint_sizes_may_be_strings_as_in_kueue_docs() -> None:
    constraints = json.dumps([{"topology": L2, "size": "8"}, {"topology": L3, "size": "4"}])
    document = workload_document(
        {REQUIRED_TOPOLOGY_ANNOTATION: L1, SLICE_CONSTRAINTS_ANNOTATION: constraints}
    )

    slices = workload_from_kueue(document, source=SOURCE).pod_sets[0].topology.slices

    assert slices == (SliceConstraint(L2, 8), SliceConstraint(L3, 4))


# --- malformed input -------------------------------------------------------------------------

ANNOTATIONS = "spec.podSets[0].template.metadata.annotations"


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(document: dict[str, Any]) -> None:
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _annotate(annotations: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    return _set(["spec", "podSets", 0, "template", "metadata", "annotations"], annotations)


def _delete_count(document: dict[str, Any]) -> None:
    del document["spec"]["podSets"][0]["count"]


MALFORMED_WORKLOADS = [
    pytest.param(
        _set(["kind"], "NodeList"), InvalidInputError, "kind", "Workload", id="wrong kind"
    ),
    pytest.param(
        _set(["apiVersion"], "kueue.x-k8s.io/v1alpha1"),
        InvalidInputError,
        "apiVersion",
        "v1beta2",
        id="unsupported version",
    ),
    pytest.param(
        _set(
            ["spec", "podSets", 0, "template", "spec", "containers", 0, "resources"],
            {"requests": {"memory": "1Tx"}},
        ),
        InvalidInputError,
        "spec.podSets[0].template.spec.containers[0].resources.requests.memory",
        "'1Tx'",
        id="bad quantity",
    ),
    pytest.param(
        _delete_count, InvalidInputError, "spec.podSets[0].count", "missing", id="missing count"
    ),
    pytest.param(
        _set(["spec", "podSets", 0, "count"], "eight"),
        InvalidInputError,
        "spec.podSets[0].count",
        "whole number",
        id="count not a number",
    ),
    pytest.param(
        _set(["spec", "podSets", 0, "count"], 0),
        InvalidRequestError,
        "spec.podSets[0]",
        "count is 0",
        id="count zero",
    ),
    pytest.param(
        _annotate(
            {REQUIRED_TOPOLOGY_ANNOTATION: L1, SLICE_CONSTRAINTS_ANNOTATION: '[{"topology": '}
        ),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_CONSTRAINTS_ANNOTATION}",
        "invalid JSON",
        id="bad JSON in the constraints annotation",
    ),
    pytest.param(
        _annotate({SLICE_CONSTRAINTS_ANNOTATION: '{"topology": "x", "size": 2}'}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_CONSTRAINTS_ANNOTATION}",
        "expected a list",
        id="constraints not a list",
    ),
    pytest.param(
        _annotate({SLICE_CONSTRAINTS_ANNOTATION: '[{"topology": "x"}]'}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_CONSTRAINTS_ANNOTATION}[0].size",
        "missing",
        id="constraint without size",
    ),
    pytest.param(
        _annotate({REQUIRED_TOPOLOGY_ANNOTATION: L1, SLICE_SIZE_ANNOTATION: "4"}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_SIZE_ANNOTATION}",
        SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        id="slice size without slice topology",
    ),
    pytest.param(
        _annotate({SLICE_REQUIRED_TOPOLOGY_ANNOTATION: L3}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_REQUIRED_TOPOLOGY_ANNOTATION}",
        SLICE_SIZE_ANNOTATION,
        id="slice topology without size",
    ),
    pytest.param(
        _annotate(
            {
                SLICE_REQUIRED_TOPOLOGY_ANNOTATION: L3,
                SLICE_SIZE_ANNOTATION: "4",
                SLICE_CONSTRAINTS_ANNOTATION: json.dumps([{"topology": L3, "size": 4}]),
            }
        ),
        InvalidInputError,
        f"{ANNOTATIONS}.{SLICE_CONSTRAINTS_ANNOTATION}",
        "cannot be combined",
        id="constraints and a single slice layer together",
    ),
    pytest.param(
        _annotate(
            {
                REQUIRED_TOPOLOGY_ANNOTATION: L1,
                SLICE_REQUIRED_TOPOLOGY_ANNOTATION: L3,
                SLICE_SIZE_ANNOTATION: "3",
            }
        ),
        InvalidRequestError,
        "spec.podSets[0]",
        "does not divide",
        id="slice size not dividing the count",
    ),
    pytest.param(
        _annotate({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true", PREFERRED_TOPOLOGY_ANNOTATION: L2}),
        InvalidInputError,
        f"{ANNOTATIONS}.{UNCONSTRAINED_TOPOLOGY_ANNOTATION}",
        "unconstrained",
        id="unconstrained and preferred",
    ),
    pytest.param(
        _annotate({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "yes"}),
        InvalidInputError,
        f"{ANNOTATIONS}.{UNCONSTRAINED_TOPOLOGY_ANNOTATION}",
        "true or false",
        id="unconstrained not a boolean",
    ),
    pytest.param(
        _annotate({SPREAD_TOPOLOGY_ANNOTATION: L3}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SPREAD_TOPOLOGY_ANNOTATION}",
        SPREAD_MAX_PODS_ANNOTATION,
        id="spread level without maximum",
    ),
    pytest.param(
        _annotate({SPREAD_MAX_PODS_ANNOTATION: "2"}),
        InvalidInputError,
        f"{ANNOTATIONS}.{SPREAD_MAX_PODS_ANNOTATION}",
        SPREAD_TOPOLOGY_ANNOTATION,
        id="spread maximum without level",
    ),
    pytest.param(
        _annotate({GROUP_NAME_ANNOTATION: "g", REQUIRED_TOPOLOGY_ANNOTATION: ""}),
        InvalidInputError,
        f"{ANNOTATIONS}.{REQUIRED_TOPOLOGY_ANNOTATION}",
        "empty",
        id="empty level",
    ),
    pytest.param(
        _set(
            ["spec", "podSets", 0, "template", "spec", "tolerations"],
            [{"key": "k", "operator": "Has"}],
        ),
        InvalidInputError,
        "spec.podSets[0].template.spec.tolerations[0].operator",
        "Exists",
        id="unknown toleration operator",
    ),
    pytest.param(
        _set(
            ["spec", "podSets", 0, "template", "spec", "affinity"],
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["n"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        InvalidInputError,
        "nodeSelectorTerms[0].matchFields",
        "not supported",
        id="matchFields",
    ),
    pytest.param(
        _set(["spec", "podSets", 0, "template"], None),
        InvalidInputError,
        "spec.podSets[0].template",
        "missing",
        id="missing template",
    ),
    pytest.param(
        _set(["spec", "podSets"], []),
        InvalidRequestError,
        "spec.podSets",
        "no pod sets",
        id="no pod sets",
    ),
]


@pytest.mark.parametrize(("mutate", "error_type", "path", "message"), MALFORMED_WORKLOADS)
def test_a_malformed_workload_is_rejected_naming_the_file_and_the_field(
    mutate: Callable[[dict[str, Any]], None], error_type: type[Exception], path: str, message: str
) -> None:
    document = workload_document()
    mutate(document)

    with pytest.raises(error_type) as caught:
        workload_from_kueue(document, source="bad-workload.yaml")

    text = str(caught.value)
    assert text.startswith("bad-workload.yaml: ")
    assert path in text
    assert message in text


def _nodes(*documents: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "NodeList", "items": list(documents)}


MALFORMED_NODES = [
    pytest.param(
        _nodes(node_document(spec={"taints": [{"key": "k", "effect": "NoPlacement"}]})),
        "items[0].spec.taints[0].effect",
        "PreferNoSchedule",
        id="unknown taint effect",
    ),
    pytest.param(
        _nodes(node_document(spec={"taints": [{"key": "k"}]})),
        "items[0].spec.taints[0].effect",
        "missing",
        id="taint without effect",
    ),
    pytest.param(
        _nodes(node_document("a"), node_document("b"), node_document("a")),
        "items[2].metadata.name",
        "items[0] and items[2]",
        id="duplicate node name",
    ),
    pytest.param(
        _nodes(node_document(status={"allocatable": {"cpu": "lots"}})),
        "items[0].status.allocatable.cpu",
        "'lots'",
        id="bad quantity",
    ),
    pytest.param(
        _nodes(node_document(metadata={"labels": {}})),
        "items[0].metadata.name",
        "missing",
        id="no name",
    ),
    pytest.param({"kind": "PodList", "items": []}, "kind", "Node", id="wrong kind"),
    pytest.param(
        _nodes(pod_document()), "items[0].kind", "expected kind Node", id="a pod among nodes"
    ),
    pytest.param([node_document()], "", "expected a mapping", id="a bare list"),
]


@pytest.mark.parametrize(("document", "path", "message"), MALFORMED_NODES)
def test_a_malformed_nodelist_is_rejected_naming_the_file_and_the_field(
    document: object, path: str, message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        nodes_from_nodelist(copy.deepcopy(document), source="nodes.json")

    text = str(caught.value)
    assert text.startswith("nodes.json")
    assert path in text
    assert message in text


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        pytest.param(pod_document(phase="Evicted"), "status.phase", "Evicted", id="unknown phase"),
        pytest.param(
            pod_document(containers=[container({"nvidia.com/gpu": "-1"})]),
            "spec.containers[0].resources.requests.nvidia.com/gpu",
            "negative",
            id="negative request",
        ),
        pytest.param({"kind": "NodeList"}, "kind", "Pod", id="wrong kind"),
    ],
)
def test_a_malformed_podlist_is_rejected_naming_the_file_and_the_field(
    document: object, path: str, message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        usage_from_podlist(document, source="pods.json")

    assert str(caught.value).startswith(f"pods.json: {path}")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("document", "error_type", "path", "message"),
    [
        pytest.param(
            {"apiVersion": "v1", "kind": "NodeList", "items": []},
            InvalidInputError,
            "kind",
            "expected kind Topology",
            id="wrong kind",
        ),
        pytest.param(
            {"apiVersion": "kueue.x-k8s.io/v1", "kind": "Topology", "metadata": {"name": "t"}},
            InvalidInputError,
            "apiVersion",
            "not supported",
            id="unsupported version",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "Topology",
                "metadata": {"name": "t"},
                "spec": {"levels": []},
            },
            TopologyError,
            "spec.levels",
            "no levels",
            id="no levels",
        ),
        pytest.param(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "Topology",
                "metadata": {"name": "t"},
                "spec": {"levels": [{"label": "x"}]},
            },
            InvalidInputError,
            "spec.levels[0].nodeLabel",
            "missing",
            id="level without nodeLabel",
        ),
        pytest.param(
            {"kind": "List", "items": []},
            InvalidInputError,
            "items",
            "0 topologies",
            id="empty list",
        ),
    ],
)
def test_a_malformed_kueue_topology_is_rejected_naming_the_file_and_the_field(
    document: object, error_type: type[Exception], path: str, message: str
) -> None:
    with pytest.raises(error_type) as caught:
        topology_from_kueue(document, source="topology.yaml")

    assert str(caught.value).startswith(f"topology.yaml: {path}")
    assert message in str(caught.value)


def test_a_kueue_topology_beside_its_resource_flavors_is_read_from_one_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: p5}\n"
        "spec: {topologyName: aws}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: aws}\n"
        "spec:\n  levels:\n  - {nodeLabel: topology.k8s.aws/network-node-layer-3}\n"
        "  - {nodeLabel: kubernetes.io/hostname}\n",
        encoding="utf-8",
    )
    spec = topology_from_kueue(read_document(path), source=str(path))
    assert spec.levels == ("topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname")
