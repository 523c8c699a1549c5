"""Rank order, node and local ranks, the label mangling and the GPU index book — the pure
parts of the local executor."""

from __future__ import annotations

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import Allocation
from topoq.domain.placement import (
    DomainAssignment,
    PlacementReason,
    PlacementResult,
    PodSetDiagnosis,
    PodSetOutcome,
)
from topoq.executors.environment import plan_pods, topology_variable
from topoq.executors.local.devices import GpuIndexBook
from topoq.testing.builders import gpu_pods, workload


def assignment(node: str | None, count: int, first_rank: int, leaf: str = "") -> DomainAssignment:
    domain = {"block": "b0", "rack": leaf or (node or "")}
    return DomainAssignment(node, domain, count, first_rank)


def allocation(*outcomes: PodSetOutcome) -> Allocation:
    return Allocation(PlacementResult("w", outcomes), {}, {})


def test_ranks_follow_pod_sets_then_first_rank_and_nodes_number_by_first_appearance() -> None:
    spec = workload(gpu_pods(1, gpus=0, name="driver"), gpu_pods(4, gpus=2))
    placed = allocation(
        PodSetOutcome("driver", 1, (assignment("n7", 1, 0),)),
        PodSetOutcome("workers", 4, (assignment("n2", 2, 2), assignment("n7", 2, 0))),
    )
    plans = plan_pods(spec, placed)
    assert [(p.rank, p.pod_set, p.node) for p in plans] == [
        (0, "driver", "n7"),
        (1, "workers", "n7"),
        (2, "workers", "n7"),
        (3, "workers", "n2"),
        (4, "workers", "n2"),
    ]
    assert [p.local_rank for p in plans] == [0, 1, 2, 0, 1]
    assert [p.local_world_size for p in plans] == [3, 3, 3, 2, 2]
    assert [p.node_rank for p in plans] == [0, 0, 0, 1, 1]
    assert [p.gpus for p in plans] == [0, 2, 2, 2, 2]


def test_a_pooled_leaf_stands_in_for_the_node() -> None:
    plans = plan_pods(
        workload(gpu_pods(2)),
        allocation(PodSetOutcome("workers", 2, (assignment(None, 2, 0, leaf="rack-3"),))),
    )
    assert [p.node for p in plans] == ["rack-3", "rack-3"]


def test_an_unplaced_pod_set_cannot_be_launched() -> None:
    unplaced = PodSetOutcome(
        "workers", 2, diagnosis=PodSetDiagnosis(PlacementReason.INSUFFICIENT_CAPACITY, "full")
    )
    with pytest.raises(InvalidInputError, match="no placement"):
        plan_pods(workload(gpu_pods(2)), allocation(unplaced))


@pytest.mark.parametrize(
    ("label", "variable"),
    [
        ("spine", "TOPOQ_TOPOLOGY_SPINE"),
        ("kubernetes.io/hostname", "TOPOQ_TOPOLOGY_KUBERNETES_IO_HOSTNAME"),
        (
            "topology.k8s.aws/network-node-layer-1",
            "TOPOQ_TOPOLOGY_TOPOLOGY_K8S_AWS_NETWORK_NODE_LAYER_1",
        ),
    ],
)
def test_topology_labels_become_upper_case_variables(label: str, variable: str) -> None:
    assert topology_variable(label) == variable


def test_gpu_indices_stay_within_the_node_and_come_back_when_released() -> None:
    book = GpuIndexBook()
    book.declare("n0", 4)
    first = book.take("n0", 3)
    assert first == (0, 1, 2)
    with pytest.raises(InvalidInputError, match="2 GPUs asked for, 1 of 4 free"):
        book.take("n0", 2)
    assert book.in_use("n0") == {0, 1, 2}  # a refused request takes nothing
    book.release("n0", (0, 2))
    assert book.take("n0", 3) == (0, 2, 3)
    assert book.take("n0", 0) == ()


def test_a_node_of_unknown_size_hands_out_the_lowest_free_indices() -> None:
    book = GpuIndexBook()
    assert book.take("n9", 2) == (0, 1)
    assert book.take("n9", 3) == (2, 3, 4)
    book.release("n9", (0,))
    assert book.take("n9", 2) == (0, 5)
