"""topoq's own cluster file, and the synthetic clusters generated from a shape."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from topoq.discovery.aws import load_instance_topology
from topoq.discovery.clusterfile import (
    ClusterFile,
    cluster_document,
    cluster_from_document,
    generate_cluster,
    load_cluster_file,
    load_example_cluster,
)
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.node import HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, Taint, TaintEffect
from topoq.domain.quantity import CPU, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS

EXAMPLES = Path(__file__).parents[2] / "examples"
LAYER_1, LAYER_2, LAYER_3, LAYER_4 = AWS_NETWORK_LAYER_LABELS


def demo(**fields: Any) -> dict[str, Any]:
    """A minimal valid cluster document with ``fields`` replacing or adding top-level keys."""
    document: dict[str, Any] = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": "demo"},
        "generate": {"shape": [2, 2, 4], "instance_type": "p5.48xlarge", "name_prefix": "p5-"},
    }
    return document | fields


def read(document: dict[str, Any]) -> ClusterFile:
    return cluster_from_document(document, source="demo.yaml")


def test_the_packaged_example_cluster_loads_with_capacity_in_use() -> None:
    cluster = load_example_cluster()

    assert cluster.name == "example"
    assert len(cluster.nodes) == 64
    assert cluster.topology.levels == (LAYER_1, LAYER_2, HOSTNAME_LABEL)
    assert set(cluster.used) <= {node.name for node in cluster.nodes}
    assert cluster.used["p5-0001"][NVIDIA_GPU] == 4


@pytest.mark.parametrize("path", sorted((EXAMPLES / "clusters").glob("*.yaml")), ids=str)
def test_every_example_cluster_file_loads(path: Path) -> None:
    cluster = load_cluster_file(path)

    assert cluster.nodes
    assert all(node.allocatable for node in cluster.nodes)


def test_the_small_explicit_example_keeps_taints_health_and_given_allocatable() -> None:
    cluster = load_cluster_file(EXAMPLES / "clusters" / "small-explicit.yaml")
    nodes = {str(node.name): node for node in cluster.nodes}

    assert nodes["gpu-a4"].unschedulable
    assert not nodes["infer-b2"].ready
    assert nodes["infer-b1"].taints == (Taint("workload", TaintEffect.NO_SCHEDULE, "inference"),)
    assert nodes["infer-b1"].allocatable[CPU] == 191_450
    assert nodes["infer-b1"].labels[INSTANCE_TYPE_LABEL] == "g6e.48xlarge"
    assert nodes["gpu-a1"].labels[HOSTNAME_LABEL] == "gpu-a1"
    assert cluster.used["gpu-a1"] == Resources({NVIDIA_GPU: 8})


def test_the_pooled_leaves_example_has_no_hostname_level_and_numbers_pools_apart() -> None:
    cluster = load_cluster_file(EXAMPLES / "clusters" / "pooled-leaves.yaml")

    assert cluster.topology.levels == (LAYER_1, LAYER_2)
    assert not cluster.topology.leaves_are_nodes
    spines = {node.name.split("-")[0]: node.labels[LAYER_1] for node in cluster.nodes}
    assert spines == {"p5": "l1-01", "p5en": "l1-02"}


def test_a_generated_cluster_names_domains_by_position_and_nodes_by_number() -> None:
    nodes, topology = generate_cluster([2, 4, 16], instance_type="p5.48xlarge", name_prefix="p5-")

    assert topology.levels == (LAYER_1, LAYER_2, HOSTNAME_LABEL)
    assert len(nodes) == 128
    assert [node.name for node in nodes[:2]] == ["p5-0001", "p5-0002"]
    assert nodes[-1].name == "p5-0128"
    last = nodes[-1].labels
    assert (last[LAYER_1], last[LAYER_2], last[HOSTNAME_LABEL]) == ("l1-02", "l2-02-04", "p5-0128")
    assert nodes[16].labels[LAYER_2] == "l2-01-02"
    assert len({node.labels[LAYER_2] for node in nodes}) == 8
    assert nodes[0].labels[INSTANCE_TYPE_LABEL] == "p5.48xlarge"


@pytest.mark.parametrize(
    ("shape", "levels"),
    [
        ([16], (HOSTNAME_LABEL,)),
        ([2, 16], (LAYER_1, HOSTNAME_LABEL)),
        ([2, 2, 2, 16], (LAYER_1, LAYER_2, LAYER_3, HOSTNAME_LABEL)),
        ([1, 1, 1, 1, 2], (*AWS_NETWORK_LAYER_LABELS, HOSTNAME_LABEL)),
    ],
)
def test_default_levels_follow_the_length_of_the_shape(
    shape: list[int], levels: tuple[str, ...]
) -> None:
    nodes, topology = generate_cluster(shape, instance_type="p5.48xlarge")

    assert topology.levels == levels
    assert all(set(levels) <= set(node.labels) for node in nodes)


def test_a_large_generated_cluster_has_unique_names_and_wider_numbers() -> None:
    nodes, _ = generate_cluster([2, 8, 16, 32], instance_type="p5.48xlarge")

    assert len(nodes) == 8192
    assert len({node.name for node in nodes}) == 8192
    assert nodes[-1].name == "node-8192"
    assert nodes[-1].labels[LAYER_3] == "l3-02-08-16"


def test_generated_nodes_can_have_explicit_levels_resources_labels_and_taints() -> None:
    taint = Taint("dedicated", TaintEffect.NO_SCHEDULE, "train")
    nodes, topology = generate_cluster(
        [3, 4],
        resources=Resources({NVIDIA_GPU: 4}),
        levels=["example.com/rack"],
        labels={"team": "a"},
        taints=[taint],
        name="racks",
    )

    assert topology.name == "racks"
    assert topology.levels == ("example.com/rack",)
    assert nodes[4].labels["example.com/rack"] == "l1-02"
    assert nodes[4].labels["team"] == "a"
    assert nodes[4].taints == (taint,)
    assert nodes[4].allocatable[NVIDIA_GPU] == 4
    assert INSTANCE_TYPE_LABEL not in nodes[4].labels


@pytest.mark.parametrize(
    ("shape", "kwargs", "place"),
    [
        ([2, 0, 16], {"instance_type": "p5.48xlarge"}, "shape[1]"),
        ([], {"instance_type": "p5.48xlarge"}, "shape"),
        ([1] * 6, {"instance_type": "p5.48xlarge"}, "shape"),
        ([2, 16], {"instance_type": "x9.huge"}, "instance_type"),
        ([2, 16], {}, "neither an instance type nor resources"),
        ([2, 16], {"instance_type": "p5.48xlarge", "levels": ["a", "b"]}, "shape"),
    ],
)
def test_generate_cluster_rejects_impossible_requests(
    shape: list[int], kwargs: dict[str, Any], place: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        generate_cluster(shape, **kwargs)

    assert place in str(caught.value)


def test_the_one_line_generate_form_reads_shape_and_instance_type() -> None:
    cluster = read(demo(generate="2x4x16 p5.48xlarge"))

    assert len(cluster.nodes) == 128
    assert cluster.nodes[0].labels[INSTANCE_TYPE_LABEL] == "p5.48xlarge"


def test_pools_continue_the_numbering_of_spines_and_of_shared_prefixes() -> None:
    cluster = read(
        demo(
            generate=None,
            pools=[
                {"shape": [2, 4], "instance_type": "p5.48xlarge"},
                "1x4 p5en.48xlarge",
                {"shape": "1x2", "resources": {"nvidia.com/gpu": 4}, "name_prefix": "small-"},
            ],
        )
    )

    names = [node.name for node in cluster.nodes]
    assert names[:9] == [f"node-{n:04d}" for n in range(1, 10)]
    assert names[-2:] == ["small-0001", "small-0002"]
    assert [node.labels[LAYER_1] for node in cluster.nodes[::4]] == [
        "l1-01",
        "l1-02",
        "l1-03",
        "l1-04",
    ]


def test_explicit_nodes_alone_take_their_levels_from_the_network_labels_they_carry() -> None:
    cluster = read(
        demo(
            generate=None,
            nodes=[
                {
                    "name": "a",
                    "instance_type": "p5.48xlarge",
                    "labels": {LAYER_1: "s", LAYER_2: "b"},
                },
                {"name": "b", "allocatable": {"nvidia.com/gpu": 8}, "labels": {LAYER_1: "s"}},
            ],
        )
    )

    assert cluster.topology.levels == (LAYER_1, LAYER_2, HOSTNAME_LABEL)
    assert cluster.nodes[1].allocatable[NVIDIA_GPU] == 8
    assert cluster.nodes[1].labels[HOSTNAME_LABEL] == "b"


def test_generated_and_explicit_nodes_live_in_one_cluster() -> None:
    explicit = {"name": "extra", "instance_type": "g5.48xlarge", "labels": {LAYER_1: "l1-01"}}
    cluster = read(demo(nodes=[explicit], used={"extra": {"nvidia.com/gpu": 1}}))

    assert len(cluster.nodes) == 17
    assert cluster.nodes[-1].name == "extra"
    assert cluster.used == {"extra": Resources({NVIDIA_GPU: 1})}


def test_a_file_without_metadata_is_named_after_the_file(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text("generate: 2x8 p5.48xlarge\n", encoding="utf-8")

    assert load_cluster_file(path).name == "lab"


def test_a_cluster_document_reads_back_to_the_same_cluster() -> None:
    original = load_cluster_file(EXAMPLES / "clusters" / "small-explicit.yaml")
    document = cluster_document(
        original.nodes, original.topology, original.name, used=original.used
    )

    again = read(yaml.safe_load(yaml.safe_dump(document)))

    assert again == original


def test_an_aws_import_converts_into_a_cluster_file() -> None:
    imported = load_instance_topology([EXAMPLES / "aws" / "describe-instance-topology.json"])
    document = cluster_document(imported.nodes, imported.topology, "from-aws")

    again = read(document)

    assert again.nodes == imported.nodes
    assert again.topology.levels == imported.topology.levels


def test_generated_nodes_share_one_allocatable_vector() -> None:
    nodes, _ = generate_cluster([4, 4, 16, 32], instance_type="p5.48xlarge")

    assert len(nodes) == 8192
    assert nodes[0].allocatable is nodes[-1].allocatable


def _without(key: str) -> dict[str, Any]:
    document = demo()
    del document[key]
    return document


def _with_generate(**fields: Any) -> dict[str, Any]:
    document = copy.deepcopy(demo())
    document["generate"] = {
        k: v for k, v in (document["generate"] | fields).items() if v is not None
    }
    return document


def _node(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu-a", "instance_type": "p5.48xlarge"} | fields


@pytest.mark.parametrize(
    ("document", "places"),
    [
        pytest.param(["a", "list"], ["demo.yaml: expected a mapping"], id="not a mapping"),
        pytest.param(
            demo(nodez=[]),
            ["demo.yaml: nodez: unknown key", "did you mean 'nodes'?", "allowed keys: apiVersion"],
            id="unknown top-level key",
        ),
        pytest.param(demo(kind="NodeList"), ["demo.yaml: kind: expected 'Cluster'"], id="kind"),
        pytest.param(demo(apiVersion="v1"), ["demo.yaml: apiVersion"], id="apiVersion"),
        pytest.param(_without("generate"), ["demo.yaml: the cluster has no nodes"], id="no nodes"),
        pytest.param(
            _with_generate(instance_type="x9.huge"),
            ["demo.yaml: generate.instance_type: unknown instance type 'x9.huge'", "p5.48xlarge"],
            id="unknown instance type",
        ),
        pytest.param(
            _with_generate(instance_type=None),
            ["demo.yaml: generate: gives neither"],
            id="no instance type",
        ),
        pytest.param(
            _with_generate(shape=[2, 0, 4]),
            ["demo.yaml: generate.shape[1]: expected a whole"],
            id="zero",
        ),
        pytest.param(
            _with_generate(shape=[2, True, 4]), ["demo.yaml: generate.shape[1]"], id="bool in shape"
        ),
        pytest.param(
            _with_generate(shape=[1, 1, 1, 1, 1, 4]),
            ["demo.yaml: generate.shape: the shape has 6 numbers", "give `levels`"],
            id="shape too long for the default levels",
        ),
        pytest.param(
            _with_generate(shape=[2] * 18),
            ["demo.yaml: generate.shape: the shape has 18"],
            id="too long",
        ),
        pytest.param(
            _with_generate(shape=16), ["demo.yaml: generate.shape: expected a list"], id="number"
        ),
        pytest.param(
            _with_generate(shape="2 by 4"), ["demo.yaml: generate.shape: cannot read"], id="text"
        ),
        pytest.param(
            demo(generate="2x4x16"), ["demo.yaml: generate: cannot read '2x4x16'"], id="one word"
        ),
        pytest.param(
            demo(generate="2x0 p5.48xlarge"),
            ["demo.yaml: generate[1]: expected a whole"],
            id="text zero",
        ),
        pytest.param(
            _with_generate(gpus=8), ["demo.yaml: generate.gpus: unknown key"], id="pool key"
        ),
        pytest.param(
            _with_generate(resources={"nvidia.com/gpu": "lots"}),
            ["demo.yaml: generate.resources", "'lots'"],
            id="bad quantity",
        ),
        pytest.param(
            _with_generate(labels={LAYER_1: "mine"}),
            ["demo.yaml: generate.shape: labels set"],
            id="labels that the shape generates",
        ),
        pytest.param(
            demo(levels=[LAYER_1, HOSTNAME_LABEL]),
            ["demo.yaml: generate.shape: a shape of 3 numbers needs 2 levels"],
            id="levels do not fit the shape",
        ),
        pytest.param(
            demo(levels=[LAYER_1, 5]), ["demo.yaml: levels[1]: expected a node label"], id="level"
        ),
        pytest.param(
            demo(pools=["2x2 p5.48xlarge"]),
            ["demo.yaml: levels: the pools have shapes of [2, 3] numbers"],
            id="pools of different depths",
        ),
        pytest.param(
            demo(pools="2x2 p5.48xlarge"),
            ["demo.yaml: pools: expected a list"],
            id="pools not a list",
        ),
        pytest.param(
            demo(used={"p5-0099": {"nvidia.com/gpu": 1}}),
            ["demo.yaml: used.p5-0099: names node 'p5-0099'", "did you mean 'p5-0009'?"],
            id="used names an unknown node",
        ),
        pytest.param(
            demo(used={"p5-0001": {"nvidia.com/gpu": 9}}),
            ["demo.yaml: used.p5-0001: uses more nvidia.com/gpu"],
            id="used more than the node has",
        ),
        pytest.param(
            demo(used={"p5-0001": [4]}),
            ["demo.yaml: used.p5-0001: expected a mapping"],
            id="used list",
        ),
        pytest.param(
            demo(nodes=[{"instance_type": "p5.48xlarge"}]),
            ["demo.yaml: nodes[0].name: is missing"],
            id="name",
        ),
        pytest.param(
            demo(nodes=[{"name": "a"}]), ["demo.yaml: nodes[0]: gives neither"], id="no capacity"
        ),
        pytest.param(
            demo(nodes=[_node(gpus=8)]),
            ["demo.yaml: nodes[0].gpus: unknown key", "allowed keys: name"],
            id="unknown node key",
        ),
        pytest.param(
            demo(nodes=[_node(instance_type="x9.huge")]),
            ["demo.yaml: nodes[0].instance_type: unknown instance type"],
            id="unknown node instance type",
        ),
        pytest.param(
            demo(nodes=[_node(taints=[{"key": "a", "effect": "Never"}])]),
            ["demo.yaml: nodes[0].taints[0].effect: unknown taint effect 'Never'", "NoSchedule"],
            id="taint effect",
        ),
        pytest.param(
            demo(nodes=[_node(taints=[{"effect": "NoSchedule"}])]),
            ["demo.yaml: nodes[0].taints[0].key: is missing"],
            id="taint key",
        ),
        pytest.param(
            demo(nodes=[_node(ready="maybe")]),
            ["demo.yaml: nodes[0].ready: expected true or false"],
            id="ready",
        ),
        pytest.param(
            demo(nodes=[_node(labels={"a": ["b"]})]),
            ["demo.yaml: nodes[0].labels.a: expected a string"],
            id="label",
        ),
        pytest.param(
            demo(nodes=[_node(), _node()]),
            ["demo.yaml: nodes[1].name: node 'gpu-a' is defined twice", "also at nodes[0].name"],
            id="duplicate explicit node",
        ),
        pytest.param(
            demo(nodes=[_node(name="p5-0003")]),
            ["demo.yaml: nodes[0].name: node 'p5-0003' is defined twice", "generate.shape"],
            id="explicit node clashing with a generated one",
        ),
    ],
)
def test_a_malformed_cluster_file_is_an_error_naming_the_file_and_the_field(
    document: Any, places: list[str]
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        read(document)

    for place in places:
        assert place in str(caught.value)


def test_a_repeated_level_is_a_topology_error_naming_the_file() -> None:
    with pytest.raises(TopologyError) as caught:
        read(demo(levels=[LAYER_1, LAYER_1, HOSTNAME_LABEL]))

    assert str(caught.value).startswith("demo.yaml: ")
    assert "listed twice" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "place"),
    [
        pytest.param("generate: [unclosed\n", "broken.yaml:2:", id="YAML syntax"),
        pytest.param("", "broken.yaml: the file is empty", id="empty"),
    ],
)
def test_an_unreadable_cluster_file_names_the_file_and_line(
    tmp_path: Path, text: str, place: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidInputError) as caught:
        load_cluster_file(path)

    assert place in str(caught.value)


@pytest.mark.parametrize(
    "generate",
    [
        {"shape": [1000, 1000, 1000], "instance_type": "p5.48xlarge"},
        {"shape": [2, 10**30], "instance_type": "p5.48xlarge"},
        "1000x1000x1000 p5.48xlarge",
    ],
    ids=["billion", "huge-number", "text"],
)
def test_a_generated_cluster_larger_than_the_node_limit_is_refused_before_it_is_built(
    generate: object,
) -> None:
    document = {"apiVersion": "topoq.io/v1", "kind": "Cluster", "generate": generate}
    with pytest.raises(InvalidInputError, match="more than 100,000 nodes"):
        cluster_from_document(document, source="c.yaml")


def test_pools_that_add_up_to_more_than_the_node_limit_are_refused() -> None:
    pools = [{"shape": [10, 6000], "instance_type": "p5.48xlarge"}] * 2
    document = {"apiVersion": "topoq.io/v1", "kind": "Cluster", "pools": pools}
    with pytest.raises(InvalidInputError, match=r"c.yaml: pools\[1\].shape: .*120,000 nodes"):
        cluster_from_document(document, source="c.yaml")
