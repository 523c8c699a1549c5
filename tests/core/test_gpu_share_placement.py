"""GPU shares in placement (issue 14 §4): on nodes an admin opens to shares, the scheduler keeps
each device's free share; a share is packed onto the tightest device that holds it, whole-GPU
pods take entirely free devices, and what a placement took (devices included) rebuilds the same
ledger, as the server rebuilds it from stored allocations after a restart."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.holdings import resources_taken
from topoq.core.ledger import CapacityLedger
from topoq.core.placement.workload import place_first_fit, place_workload
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import (
    GPU_SHARE,
    GPU_SHARING_LABEL,
    device_resource,
    per_pod_gpu_ask,
)
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec
from topoq.testing.builders import cluster, node_resources, pod_set, tree_and_ledger, workload

SHARING = {GPU_SHARING_LABEL: "true"}


def sharing_cluster(nodes: int = 2, gpus: int = 2) -> tuple[TopologyTree, CapacityLedger]:
    return tree_and_ledger(*cluster([1, nodes], resources=node_resources(gpus), labels=SHARING))


def devices(ledger: CapacityLedger, node: int) -> list[int]:
    """The free thousandths of each device of ``node``."""
    return [int(value) for value in ledger.free[node, ledger.tree.device_columns]]


def picks(result: PlacementResult) -> list[tuple[str | None, tuple[tuple[int, ...], ...]]]:
    return [(a.node, a.gpu_devices) for outcome in result.pod_sets for a in outcome.assignments]


def shares(name: str, count: int, milli: int) -> WorkloadSpec:
    return workload(pod_set("s", count, {GPU_SHARE: milli, "cpu": 1}), name=name)


def whole(name: str, count: int, gpus: int) -> WorkloadSpec:
    return workload(pod_set("w", count, {NVIDIA_GPU: gpus}), name=name)


def test_only_nodes_opened_to_shares_get_device_columns_and_their_inventory_is_unchanged() -> None:
    opened, spec = cluster([1, 2], resources=node_resources(4), labels=SHARING)
    closed = NodeSpec(NodeName("plain"), {"spine": "s0", "kubernetes.io/hostname": "plain"})
    closed = NodeSpec(closed.name, closed.labels, node_resources(4))
    tree = build_tree([*opened, closed], spec)
    assert [tree.resource_names[c] for c in tree.device_columns] == [
        device_resource(i) for i in range(4)
    ]
    assert tree.shares_gpus.tolist() == [True, True, False]
    plain = tree.node_index[NodeName("plain")]
    assert tree.capacity[plain, tree.device_columns].tolist() == [0, 0, 0, 0]
    assert tree.capacity[0, tree.resource_column[GPU_SHARE]] == 4000
    assert opened[0].allocatable.amount(GPU_SHARE) == 0  # derived for placement only


def test_a_topology_whose_leaves_pool_nodes_keeps_no_devices() -> None:
    nodes, spec = cluster([1, 2], resources=node_resources(4), labels=SHARING, hostname_level=False)
    tree = build_tree(nodes, spec)
    assert not len(tree.device_columns) and GPU_SHARE not in tree.resource_column


def test_shares_go_to_the_tightest_device_and_keep_whole_devices_whole() -> None:
    _tree, ledger = sharing_cluster(nodes=1, gpus=2)
    first, ledger = place_workload(ledger, shares("a", 1, 500))
    assert picks(first) == [("n00", ((0,),))]
    second, ledger = place_workload(ledger, shares("b", 2, 300))
    assert picks(second) == [("n00", ((0,), (1,)))]  # 500 free on device 0, then 200
    assert devices(ledger, 0) == [200, 700]
    third, ledger = place_workload(ledger, shares("c", 1, 200))
    assert picks(third) == [("n00", ((0,),))]
    assert devices(ledger, 0) == [0, 700]


def test_whole_gpus_need_entirely_free_devices_though_the_gpu_count_says_otherwise() -> None:
    tree, ledger = sharing_cluster(nodes=2, gpus=2)
    _, ledger = place_workload(ledger, shares("a", 1, 100))  # n00 device 0
    assert ledger.free[0, tree.resource_column[NVIDIA_GPU]] == 2  # shares take no whole GPU
    placed, ledger = place_workload(ledger, whole("w", 1, 2))
    assert picks(placed) == [("n01", ((0, 1),))]
    refused, _ = place_workload(ledger, whole("x", 1, 2))
    assert not refused.admitted
    diagnosis = refused.pod_sets[0].diagnosis
    assert diagnosis is not None and diagnosis.excluded_nodes == {
        "too_little_free_nvidia.com/gpu": 2
    }
    one, ledger = place_workload(ledger, whole("y", 1, 1))
    assert picks(one) == [("n00", ((1,),))] and devices(ledger, 0) == [900, 0]


def test_a_share_no_single_device_holds_does_not_fit_and_says_why() -> None:
    _, ledger = sharing_cluster(nodes=1, gpus=2)
    _, ledger = place_workload(ledger, shares("a", 2, 600))  # 400 left on each device
    assert ledger.free[0, ledger.tree.resource_column[GPU_SHARE]] == 800
    refused, _ = place_workload(ledger, shares("b", 1, 500))
    diagnosis = refused.pod_sets[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.excluded_nodes == {f"too_little_free_{GPU_SHARE}": 1}


@pytest.mark.parametrize(
    ("asked", "also"),
    [({}, ""), ({"example.com/fpga": 1}, "; no node offers example.com/fpga either")],
)
def test_a_share_where_no_node_is_open_to_shares_is_explained_in_the_users_terms(
    asked: dict[str, int], also: str
) -> None:
    """What ``topoq place``, ``explain`` and the simulator show: the share as the user asked it
    (part of ``nvidia.com/gpu``), and how to open nodes, not the resource it is kept as."""
    _, ledger = tree_and_ledger(*cluster([1, 2], resources=node_resources(2)))  # none open
    asking = workload(pod_set("s", 2, {GPU_SHARE: 250, "cpu": 1, **asked}), name="a")
    refused, _ = place_workload(ledger, asking)
    diagnosis = refused.pod_sets[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.message == (
        "each pod of 's' asks for a share of one GPU (0.25 nvidia.com/gpu) and no node of "
        "the topology is open to GPU shares" + also
    )
    assert diagnosis.relaxations == (
        "ask for whole GPUs (nvidia.com/gpu: 1)",
        'label GPU nodes topoq.io/gpu-sharing: "true" to open them to shares',
    )
    other = workload(pod_set("f", 1, {"example.com/fpga": 1}), name="f")
    plain = place_workload(ledger, other)[0].pod_sets[0].diagnosis
    assert plain is not None and plain.message == "no node of the topology offers example.com/fpga"


def test_shares_short_of_room_are_told_to_open_more_nodes_to_shares_too() -> None:
    _, ledger = sharing_cluster(nodes=1, gpus=2)  # one open node: 4 halves at most
    refused, _ = place_workload(ledger, shares("a", 5, 500))
    diagnosis = refused.pod_sets[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.relaxations[-1] == (
        'label more GPU nodes topoq.io/gpu-sharing: "true" to open them to shares'
    )
    whole_refused, _ = place_workload(ledger, whole("w", 3, 1))
    told = whole_refused.pod_sets[0].diagnosis
    assert told is not None and not any("gpu-sharing" in r for r in told.relaxations)


def test_shares_never_land_on_nodes_not_open_to_them_and_whole_pods_still_do() -> None:
    opened, spec = cluster([1, 1], resources=node_resources(2), labels=SHARING)
    closed = NodeSpec(
        NodeName("plain"), {"spine": "s0", "kubernetes.io/hostname": "plain"}, node_resources(2)
    )
    _tree, ledger = tree_and_ledger([*opened, closed], spec)
    placed, ledger = place_workload(ledger, shares("a", 4, 500))
    assert {node for node, _ in picks(placed)} == {"n00"}
    assert not place_workload(ledger, shares("b", 1, 500))[0].admitted
    plain, _ = place_workload(ledger, whole("w", 1, 2))
    assert picks(plain) == [("plain", ())]  # devices are not kept there


def test_first_fit_placement_packs_devices_too() -> None:
    _, ledger = sharing_cluster(nodes=1, gpus=2)
    placed, ledger = place_first_fit(ledger, shares("a", 3, 500))
    assert picks(placed) == [("n00", ((0,), (0,), (1,)))]
    assert devices(ledger, 0) == [0, 500]


Ask = tuple[str, int, int]
"""(kind, pods, amount): shares of ``amount`` thousandths, or ``amount`` whole GPUs."""


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("share"), st.integers(1, 5), st.sampled_from([100, 250, 300, 500, 700])
            ),
            st.tuples(st.just("whole"), st.integers(1, 2), st.integers(1, 4)),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_what_placements_took_rebuilds_the_ledger_and_never_overcommits_a_device(
    asks: list[Ask], first_fit: bool
) -> None:
    tree, ledger = sharing_cluster(nodes=3, gpus=4)
    used: dict[str, Resources] = {}
    for index, (kind, pods, amount) in enumerate(asks):
        asked = (
            shares(f"j{index}", pods, amount)
            if kind == "share"
            else whole(f"j{index}", pods, amount)
        )
        place = place_first_fit if first_fit else place_workload
        result, after = place(ledger, asked)
        if not result.admitted:
            assert after is ledger
            continue
        taken = resources_taken(ledger, after, result)
        _check_devices_match(tree, result, taken, kind, amount)
        for node, resources in taken.items():
            used[node] = used.get(node, Resources()) + resources
        ledger = after
        free_devices = ledger.free[:, tree.device_columns]
        assert (free_devices >= 0).all() and (free_devices <= 1000).all()
    rebuilt = CapacityLedger.with_usage(tree, used, strict=True)
    assert np.array_equal(rebuilt.free, ledger.free)


def _check_devices_match(
    tree: TopologyTree,
    result: PlacementResult,
    taken: Mapping[str, Resources],
    kind: str,
    amount: int,
) -> None:
    """Each pod's devices are what its node was charged: a share on one device, whole GPUs
    on as many devices, each a whole one."""
    for outcome in result.pod_sets:
        for assignment in outcome.assignments:
            assert assignment.node is not None
            assert len(assignment.gpu_devices) == assignment.count
            charged: dict[int, int] = {}
            for pod in assignment.gpu_devices:
                assert len(pod) == (1 if kind == "share" else amount)
                for device in pod:
                    charged[device] = charged.get(device, 0) + (amount if kind == "share" else 1000)
            on_node = taken[assignment.node]
            assert {
                device: on_node.amount(device_resource(device)) for device in charged
            } == charged


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("0.5", (GPU_SHARE, 500)),
        ("250m", (GPU_SHARE, 250)),
        (0.125, (GPU_SHARE, 125)),
        (2, (NVIDIA_GPU, 2)),
        ("1", (NVIDIA_GPU, 1)),
        ("0", (NVIDIA_GPU, 0)),
    ],
)
def test_a_pods_gpu_ask_reads_as_whole_gpus_or_a_share(
    written: str | float, expected: tuple[str, int]
) -> None:
    assert per_pod_gpu_ask(written, "requests") == expected


@pytest.mark.parametrize("written", ["1.5", "0.0005", "-0.5", "2500m"])
def test_an_ask_that_is_neither_whole_gpus_nor_a_share_of_one_is_refused_with_a_hint(
    written: str,
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        per_pod_gpu_ask(written, "requests")
    assert refused.value.where == "requests"
    assert refused.value.hint


@pytest.mark.parametrize(
    ("requests", "words"),
    [
        ({NVIDIA_GPU: 1, GPU_SHARE: 500}, "whole GPUs and a share"),
        ({GPU_SHARE: 1000}, "a whole GPU or more"),
        ({device_resource(0): 500}, "kept by the scheduler"),
    ],
)
def test_a_pod_set_with_an_impossible_gpu_ask_is_refused(
    requests: dict[str, int], words: str
) -> None:
    with pytest.raises(InvalidInputError, match=words):
        pod_set("p", 1, requests)


def test_a_node_that_reports_a_derived_gpu_resource_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="derived by the scheduler") as refused:
        NodeSpec(NodeName("n"), {}, Resources({GPU_SHARE: 8000}))
    assert GPU_SHARING_LABEL in (refused.value.hint or "")
