"""The topology tree: which nodes belong, their order, and the contiguous domain indexes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement, place_workload
from topoq.core.tree import ExclusionReason, build_tree
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.node import HOSTNAME_LABEL, NodeName
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.testing.builders import BLOCK, SPINE, cluster, gpu_pods, tree_and_ledger, workload


def test_not_ready_cordoned_and_unlabelled_nodes_are_left_out_with_their_reason() -> None:
    nodes, spec = cluster([1, 2, 2])
    nodes[0] = replace(nodes[0], ready=False)
    nodes[1] = replace(nodes[1], unschedulable=True)
    nodes[2] = replace(nodes[2], labels={HOSTNAME_LABEL: "n02", SPINE: "s0"})
    tree = build_tree(nodes, spec)
    assert [node.name for node in tree.nodes] == ["n03"]
    assert [(e.name, e.reason) for e in tree.excluded] == [
        ("n00", ExclusionReason.NOT_READY),
        ("n01", ExclusionReason.CORDONED),
        ("n02", ExclusionReason.MISSING_LEVEL_LABEL),
    ]
    assert "block" in tree.excluded[2].detail


def test_nodes_are_in_natural_label_order_whatever_the_input_order() -> None:
    nodes, spec = cluster([1, 1, 12])
    tree = build_tree(list(reversed(nodes)), spec)
    assert [node.name for node in tree.nodes] == [f"n{i:02d}" for i in range(12)]
    renamed = [
        replace(n, labels=dict(n.labels) | {HOSTNAME_LABEL: f"p5-{i}"}) for i, n in enumerate(nodes)
    ]
    tree = build_tree(renamed, spec)
    assert [n.labels[HOSTNAME_LABEL] for n in tree.nodes][:3] == ["p5-0", "p5-1", "p5-2"]
    assert tree.nodes[10].labels[HOSTNAME_LABEL] == "p5-10"


def test_domains_cover_contiguous_node_and_child_ranges() -> None:
    tree = build_tree(*cluster([2, 3, 4]))
    spines, blocks, hosts = tree.levels
    assert spines.node_start.tolist() == [0, 12, 24]
    assert spines.child_start is not None and spines.child_start.tolist() == [0, 3, 6]
    assert blocks.parent is not None and blocks.parent.tolist() == [0, 0, 0, 1, 1, 1]
    assert hosts.size == 24 and hosts.child_start is None
    assert tree.domain_labels(1, 4) == {SPINE: "s1", BLOCK: "b4"}


def test_same_block_name_under_two_spines_is_two_domains() -> None:
    nodes, spec = cluster([2, 1, 2])
    same = [replace(n, labels=dict(n.labels) | {BLOCK: "leaf"}) for n in nodes]
    tree = build_tree(same, spec)
    assert tree.levels[1].paths == (("s0", "leaf"), ("s1", "leaf"))


def test_duplicate_node_names_and_shared_hostnames_are_errors() -> None:
    nodes, spec = cluster([1, 1, 2])
    with pytest.raises(TopologyError, match="node 'n00' is listed twice"):
        build_tree([nodes[0], nodes[0]], spec)
    twin = replace(nodes[1], labels=dict(nodes[0].labels))
    with pytest.raises(TopologyError, match="same hostname 'n00'"):
        build_tree([nodes[0], twin], spec)


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ((), "no levels"),
        (tuple(f"l{i}" for i in range(17)), "17 levels"),
        (("a", "a"), "listed twice"),
        ((HOSTNAME_LABEL, "rack"), "is not the lowest level"),
    ],
)
def test_bad_level_lists_are_rejected(levels: tuple[str, ...], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        TopologySpec("t", levels)


def test_sixteen_levels_build_and_place() -> None:
    levels = tuple(f"l{i}" for i in range(15))
    nodes, spec = cluster([1] * 14 + [2, 4], levels=levels)
    assert spec.depth == 16
    tree, ledger = tree_and_ledger(nodes, spec)
    result = find_placement(ledger, workload(gpu_pods(4, required="l14")))
    assert result.admitted and tree.depth == 16


def test_usage_on_unknown_nodes_is_an_error_only_when_strict() -> None:
    tree = build_tree(*cluster([1, 1, 2]))
    used = {"ghost": Resources({NVIDIA_GPU: 1})}
    assert CapacityLedger.with_usage(tree, used).free.sum() == tree.capacity.sum()
    with pytest.raises(InvalidInputError, match="unknown node 'ghost'"):
        CapacityLedger.with_usage(tree, used, strict=True)


def test_overcommitted_node_counts_as_full_not_negative() -> None:
    tree = build_tree(*cluster([1, 1, 1]))
    ledger = CapacityLedger.with_usage(tree, {NodeName("n00"): Resources({NVIDIA_GPU: 12})})
    assert ledger.free[0, tree.resource_column[NVIDIA_GPU]] == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.booleans())
def test_domain_totals_stay_equal_to_the_sum_of_their_nodes(gangs: list[int], hosts: bool) -> None:
    nodes, spec = cluster([2, 2, 3], hostname_level=hosts)
    _, ledger = tree_and_ledger(nodes, spec)
    for size in gangs:
        _, ledger = place_workload(ledger, workload(gpu_pods(size, gpus=3)))
    for level, totals in zip(ledger.tree.levels, ledger.domain_free, strict=True):
        sums = np.add.reduceat(ledger.free, level.node_start[:-1], axis=0)
        assert (totals == sums).all()
