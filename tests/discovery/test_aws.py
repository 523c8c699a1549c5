"""Importing clusters from ``aws ec2 describe-instance-topology`` output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from topoq.discovery.aws import (
    PLACEMENT_GROUP_LABEL,
    ZONE_ID_LABEL,
    ZONE_LABEL,
    cluster_from_instance_topology,
    load_instance_topology,
    network_layer_label,
)
from topoq.discovery.documents import documents_in_text
from topoq.discovery.instance_types import find_instance_type
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.node import HOSTNAME_LABEL, INSTANCE_TYPE_LABEL
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_ULTRASERVER_LABEL

EXAMPLE = Path(__file__).parents[2] / "examples" / "aws" / "describe-instance-topology.json"
LAYERS_3 = tuple(network_layer_label(layer) for layer in (1, 2, 3))
P5_GPUS = 8


def instance(
    instance_id: str, network_nodes: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "InstanceId": instance_id,
        "InstanceType": "p5.48xlarge",
        "NetworkNodes": ["nn-1", "nn-2a", "nn-3a"] if network_nodes is None else network_nodes,
    }
    return record | fields


def page(*instances: dict[str, Any]) -> dict[str, Any]:
    return {"Instances": list(instances)}


def test_the_example_file_imports_every_instance_and_warns_about_what_it_leaves_out() -> None:
    cluster = load_instance_topology([EXAMPLE])

    assert len(cluster.nodes) == 35
    assert cluster.topology.name == "aws"
    assert cluster.topology.levels == (*LAYERS_3, HOSTNAME_LABEL)
    assert (
        len({node.labels[LAYERS_3[1]] for node in cluster.nodes if node.labels.get(LAYERS_3[1])})
        == 2
    )
    outside = [node for node in cluster.nodes if LAYERS_3[0] not in node.labels]
    assert len(outside) == 1
    assert any(outside[0].name in warning for warning in cluster.warnings)
    assert any("CapacityBlockId" in warning for warning in cluster.warnings)
    gb200 = [node for node in cluster.nodes if AWS_ULTRASERVER_LABEL in node.labels]
    assert [node.labels[INSTANCE_TYPE_LABEL] for node in gb200] == ["p6e-gb200.36xlarge"] * 2
    p5 = [node for node in cluster.nodes if node.labels[INSTANCE_TYPE_LABEL] == "p5.48xlarge"]
    assert all(node.allocatable[NVIDIA_GPU] == P5_GPUS for node in p5)


def test_an_instance_becomes_a_node_named_by_its_id_with_every_field_as_a_label() -> None:
    record = instance(
        "i-01",
        AvailabilityZone="us-east-2b",
        ZoneId="use2-az2",
        CapacityBlockId="cr-01",
        GroupName="train-cpg",
    )
    (node,) = cluster_from_instance_topology(page(record), source="t.json").nodes

    assert node.name == "i-01"
    assert dict(node.labels) == {
        HOSTNAME_LABEL: "i-01",
        INSTANCE_TYPE_LABEL: "p5.48xlarge",
        LAYERS_3[0]: "nn-1",
        LAYERS_3[1]: "nn-2a",
        LAYERS_3[2]: "nn-3a",
        ZONE_LABEL: "us-east-2b",
        ZONE_ID_LABEL: "use2-az2",
        AWS_ULTRASERVER_LABEL: "cr-01",
        PLACEMENT_GROUP_LABEL: "train-cpg",
    }
    known = find_instance_type("p5.48xlarge")
    assert known is not None
    assert node.allocatable == known.allocatable()


def test_a_sagemaker_instance_type_keeps_its_printed_name_and_gets_the_ec2_capacity() -> None:
    record = instance("i-01", InstanceType="ml.p5.48xlarge")
    (node,) = cluster_from_instance_topology([page(record)], source="t.json").nodes

    assert node.labels[INSTANCE_TYPE_LABEL] == "ml.p5.48xlarge"
    assert node.allocatable[NVIDIA_GPU] == P5_GPUS


@pytest.mark.parametrize(
    ("documents", "expected_ids"),
    [
        pytest.param(page(instance("i-1"), instance("i-2")), ["i-1", "i-2"], id="one page"),
        pytest.param([page(instance("i-1")), page(instance("i-2"))], ["i-1", "i-2"], id="pages"),
        pytest.param(
            [[page(instance("i-1")), page()], page(instance("i-2"))],
            ["i-1", "i-2"],
            id="a JSON list of pages, and an empty page",
        ),
    ],
)
def test_pages_come_in_any_layout(documents: Any, expected_ids: list[str]) -> None:
    cluster = cluster_from_instance_topology(documents, source="t.json")

    assert [node.name for node in cluster.nodes] == expected_ids


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            json.dumps(page(instance("i-1")) | {"NextToken": "x"})
            + "\n"
            + json.dumps(page(instance("i-2"))),
            id="concatenated pages",
        ),
        pytest.param(json.dumps([page(instance("i-1")), page(instance("i-2"))]), id="list"),
        pytest.param(
            "Instances:\n- {InstanceId: i-1, InstanceType: p5.48xlarge, NetworkNodes: [a, b, c]}\n"
            "- {InstanceId: i-2, InstanceType: p5.48xlarge, NetworkNodes: [a, b, c]}\n",
            id="YAML",
        ),
    ],
)
def test_a_file_holds_pages_in_any_layout(tmp_path: Path, text: str) -> None:
    path = tmp_path / "topology.json"
    path.write_text(text, encoding="utf-8")

    cluster = load_instance_topology([path])

    assert [node.name for node in cluster.nodes] == ["i-1", "i-2"]


def test_levels_include_the_ultraserver_when_every_placed_instance_has_a_capacity_block() -> None:
    documents = page(
        instance("i-1", CapacityBlockId="cr-1"),
        instance("i-2", ["nn-1", "nn-2b", "nn-3b"], CapacityBlockId="cr-2"),
        instance("i-3", []),
    )
    cluster = cluster_from_instance_topology(documents, source="t.json")

    assert cluster.topology.levels == (*LAYERS_3, AWS_ULTRASERVER_LABEL, HOSTNAME_LABEL)


def test_a_capacity_block_across_network_nodes_is_left_out_of_the_levels_with_a_warning() -> None:
    documents = page(
        instance("i-1", CapacityBlockId="cr-1"),
        instance("i-2", ["nn-1", "nn-2b", "nn-3b"], CapacityBlockId="cr-1"),
    )
    cluster = cluster_from_instance_topology(documents, source="t.json")

    assert cluster.topology.levels == (*LAYERS_3, HOSTNAME_LABEL)
    assert any("'cr-1'" in warning for warning in cluster.warnings)


def test_four_network_layers_give_four_levels() -> None:
    documents = page(instance("i-1", ["nn-1", "nn-2", "nn-3", "nn-4"]))
    cluster = cluster_from_instance_topology(documents, source="t.json")

    assert cluster.topology.levels == (
        *(network_layer_label(layer) for layer in (1, 2, 3, 4)),
        HOSTNAME_LABEL,
    )
    assert cluster.warnings == ()


def test_mixed_depths_use_the_layers_every_instance_has_and_warn() -> None:
    documents = page(instance("i-1", ["nn-1", "nn-2", "nn-3", "nn-4"]), instance("i-2"))
    cluster = cluster_from_instance_topology(documents, source="t.json")

    assert cluster.topology.levels == (*LAYERS_3, HOSTNAME_LABEL)
    assert any("using the 3 layers" in warning for warning in cluster.warnings)
    assert cluster.nodes[0].labels[network_layer_label(4)] == "nn-4"


def test_without_any_network_nodes_the_topology_has_the_hosts_only() -> None:
    cluster = cluster_from_instance_topology(page(instance("i-1", [])), source="t.json")

    assert cluster.topology.levels == (HOSTNAME_LABEL,)
    assert any("no instance reports network nodes" in warning for warning in cluster.warnings)


def test_an_unknown_instance_type_uses_the_default_resources_when_given() -> None:
    default = Resources({NVIDIA_GPU: 2})
    documents = page(instance("i-1", InstanceType="x9.huge"))

    (node,) = cluster_from_instance_topology(
        documents, source="t.json", default_resources=default
    ).nodes

    assert node.allocatable[NVIDIA_GPU] == 2
    assert node.labels[INSTANCE_TYPE_LABEL] == "x9.huge"


def test_an_unknown_instance_type_names_the_instance_and_lists_the_known_types() -> None:
    documents = page(instance("i-1"), instance("i-2", InstanceType="x9.huge"))

    with pytest.raises(InvalidInputError) as caught:
        cluster_from_instance_topology(documents, source="t.json")

    message = str(caught.value)
    assert "t.json: Instances[1].InstanceType" in message
    assert "'i-2'" in message
    assert "p5.48xlarge" in message


def test_an_instance_listed_on_two_pages_is_a_topology_error_naming_both_places() -> None:
    documents = [page(instance("i-1")), page(instance("i-2"), instance("i-1"))]

    with pytest.raises(TopologyError) as caught:
        cluster_from_instance_topology(documents, source="t.json")

    message = str(caught.value)
    assert "'i-1'" in message
    assert "t.json page 2: Instances[1]" in message
    assert "t.json page 1: Instances[0]" in message


@pytest.mark.parametrize(
    ("documents", "error", "place"),
    [
        pytest.param(["oops"], InvalidInputError, "t.json: expected a mapping", id="not a map"),
        pytest.param(
            {"Reservations": []}, InvalidInputError, "t.json: has no 'Instances'", id="no Instances"
        ),
        pytest.param(
            {"Instances": {}},
            InvalidInputError,
            "t.json: Instances: expected a list",
            id="Instances not a list",
        ),
        pytest.param(
            page(), InvalidInputError, "t.json: the output lists no instances", id="no instances"
        ),
        pytest.param(
            page(
                *(instance(f"i-{n}") for n in range(3)), instance("i-3") | {"NetworkNodes": "nn-1"}
            ),
            InvalidInputError,
            "t.json: Instances[3].NetworkNodes: expected a list",
            id="NetworkNodes not a list",
        ),
        pytest.param(
            page(instance("i-1") | {"NetworkNodes": ["nn-1", 7, "nn-3"]}),
            InvalidInputError,
            "t.json: Instances[0].NetworkNodes[1]",
            id="a network node that is not a string",
        ),
        pytest.param(
            page({"InstanceType": "p5.48xlarge"}),
            InvalidInputError,
            "t.json: Instances[0].InstanceId: is missing",
            id="no InstanceId",
        ),
        pytest.param(
            page(instance("i-1"), instance("i-2", ["nn-1", "nn-2a"]) | {"InstanceType": None}),
            InvalidInputError,
            "t.json: Instances[1].InstanceType: is missing",
            id="no InstanceType",
        ),
        pytest.param(
            [page(instance("i-1")), page(instance("i-2", ["nn-9", "nn-2a", "nn-3a"]))],
            TopologyError,
            "t.json page 2: Instances[0].NetworkNodes[1]",
            id="a network node under two parents",
        ),
        pytest.param(
            [page(instance("i-1")), {"Instances": [None]}],
            InvalidInputError,
            "t.json page 2: Instances[0]: expected a mapping",
            id="an instance that is not a mapping, on page 2",
        ),
    ],
)
def test_malformed_output_is_an_error_naming_the_source_and_the_field(
    documents: Any, error: type[InvalidInputError], place: str
) -> None:
    with pytest.raises(error) as caught:
        cluster_from_instance_topology(documents, source="t.json")

    assert place in str(caught.value)


@pytest.mark.parametrize(
    ("text", "place"),
    [
        pytest.param('{"Instances": [}', "bad.json:1:", id="invalid JSON"),
        pytest.param('{"Instances": []}\n{"Instances": [', "bad.json:", id="a broken second page"),
        pytest.param("", "bad.json: the file is empty", id="empty"),
    ],
)
def test_unreadable_files_name_the_file(tmp_path: Path, text: str, place: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidInputError) as caught:
        load_instance_topology([path])

    assert str(caught.value).startswith(str(tmp_path))
    assert place in str(caught.value)


def test_a_missing_file_is_named() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("nowhere.json: file not found")):
        load_instance_topology(["nowhere.json"])


def test_pages_from_several_files_are_numbered_per_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(page(instance("i-1"))), encoding="utf-8")
    second.write_text(json.dumps(page(instance("i-1"))), encoding="utf-8")

    with pytest.raises(TopologyError) as caught:
        load_instance_topology([first, second])

    assert f"{second}: Instances[0]" in str(caught.value)
    assert f"{first}: Instances[0]" in str(caught.value)


def test_documents_in_text_splits_concatenated_json_pages() -> None:
    text = '{"Instances": []}\n\n{"Instances": [], "NextToken": null}\n'

    assert documents_in_text(text, source="t.json") == [
        {"Instances": []},
        {"Instances": [], "NextToken": None},
    ]
