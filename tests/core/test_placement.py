"""Table-driven placement cases on small topologies with the expected placement spelled out."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from topoq.core.placement import find_placement, place_workload
from topoq.domain.errors import InvalidRequestError
from topoq.domain.node import HOSTNAME_LABEL, Taint, TaintEffect
from topoq.domain.placement import PlacementReason, PlacementResult
from topoq.domain.quantity import CPU, NVIDIA_GPU
from topoq.domain.workload import (
    NodeSelectorTerm,
    PodSetSpec,
    SelectorOperator,
    SelectorRequirement,
    Toleration,
    TolerationOperator,
)
from topoq.testing.builders import (
    BLOCK,
    RACK,
    SPINE,
    cluster,
    gpu_pods,
    pod_set,
    tree_and_ledger,
    workload,
)

FULL = {NVIDIA_GPU: 8}


def nodes_of(result: PlacementResult, pod_set: int = 0) -> list[tuple[str | None, int]]:
    return [(a.node, a.count) for a in result.pod_sets[pod_set].assignments]


@dataclass
class Case:
    name: str
    shape: list[int]
    pod_sets: list[PodSetSpec]
    expected: list[list[tuple[str | None, int]]] | None
    used: dict[str, dict[str, object]] = field(default_factory=dict)
    reason: PlacementReason | None = None


# 2 spines × 2 blocks × 4 nodes: s0 = {b0: n00-n03, b1: n04-n07}, s1 = {b2: n08-n11, b3: n12-n15}
CASES = [
    Case(
        "required block takes the tightest block that holds the gang",
        [2, 2, 4],
        [gpu_pods(3, required=BLOCK)],
        [[("n01", 1), ("n02", 1), ("n03", 1)]],
        used={"n00": FULL},
    ),
    Case(
        "required block is unschedulable when no block has room",
        [2, 2, 4],
        [gpu_pods(5, required=BLOCK)],
        None,
        reason=PlacementReason.TOPOLOGY_UNSATISFIABLE,
    ),
    Case(
        "preferred block spills into the spine whose blocks hold it with fewest blocks",
        [2, 2, 4],
        [gpu_pods(6, preferred=BLOCK)],
        [[("n00", 1), ("n01", 1), ("n04", 1), ("n05", 1), ("n06", 1), ("n07", 1)]],
        used={"n02": FULL, "n03": FULL},
    ),
    Case(
        "preferred block splits across spines, as few as possible, when no spine holds it",
        [2, 2, 4],
        [gpu_pods(12, preferred=BLOCK)],
        [[(f"n{i:02d}", 1) for i in [*range(4), *range(8, 16)]]],
        used={"n04": FULL, "n05": FULL, "n06": FULL, "n07": FULL},
    ),
    Case(
        "unconstrained pods pack onto the tightest node first",
        [1, 2, 2],
        [gpu_pods(2, gpus=2)],
        [[("n01", 2)]],
        used={"n01": {NVIDIA_GPU: 4}},
    ),
    Case(
        "required spine with preferred block stays in one spine even when split over blocks",
        [2, 2, 4],
        [gpu_pods(6, required=SPINE, preferred=BLOCK)],
        [[("n00", 1), ("n01", 1), ("n04", 1), ("n05", 1), ("n06", 1), ("n07", 1)]],
        used={"n02": FULL, "n03": FULL, "n10": FULL},
    ),
    Case(
        "required spine with preferred block fails rather than leave the spine",
        [2, 2, 4],
        [gpu_pods(9, required=SPINE, preferred=BLOCK)],
        None,
        reason=PlacementReason.TOPOLOGY_UNSATISFIABLE,
    ),
    Case(
        "slices of 4 skip a block that has only 3 free nodes",
        [1, 3, 4],
        [gpu_pods(8, required=SPINE, slices=[(BLOCK, 4)])],
        [[(f"n{i:02d}", 1) for i in range(4, 12)]],
        used={"n00": FULL},
    ),
    Case(
        "slices fail when free nodes are scattered across blocks",
        [1, 3, 4],
        [gpu_pods(4, required=SPINE, slices=[(BLOCK, 2)])],
        None,
        used={
            "n00": FULL,
            "n01": FULL,
            "n02": FULL,
            "n04": FULL,
            "n05": FULL,
            "n06": FULL,
            "n08": FULL,
            "n09": FULL,
            "n10": FULL,
        },
        reason=PlacementReason.INSUFFICIENT_CAPACITY,
    ),
    Case(
        "two slice layers: 4 pods per block, 2 per rack",
        [1, 2, 2, 2],
        [gpu_pods(4, required=SPINE, slices=[(BLOCK, 4), (RACK, 2)])],
        [[("n04", 1), ("n05", 1), ("n06", 1), ("n07", 1)]],
        used={"n00": FULL},
    ),
    Case(
        "spread puts at most one pod in each block",
        [2, 2, 4],
        [gpu_pods(3, gpus=1, spread=(BLOCK, 1))],
        [[("n00", 1), ("n04", 1), ("n08", 1)]],
    ),
    Case(
        "spread fails when there are fewer blocks than pods",
        [1, 2, 4],
        [gpu_pods(3, gpus=1, spread=(BLOCK, 1))],
        None,
        reason=PlacementReason.TOPOLOGY_UNSATISFIABLE,
    ),
    Case(
        "fractional pods share a node: four 2-GPU pods on one node",
        [1, 1, 2],
        [gpu_pods(4, gpus=2, required=HOSTNAME_LABEL)],
        [[("n00", 4)]],
    ),
    Case(
        "a pod-slot limit stops placement even with free GPUs",
        [1, 1, 1],
        [pod_set("cpu", 3, {CPU: "1"})],
        None,
        used={"n00": {"pods": 108}},
        reason=PlacementReason.INSUFFICIENT_CAPACITY,
    ),
    Case(
        "group: the leader joins its workers' block",
        [1, 2, 4],
        [
            pod_set("launcher", 1, {CPU: "2"}, required=BLOCK, group="g"),
            gpu_pods(4, required=BLOCK, group="g"),
        ],
        [[("n04", 1)], [("n04", 1), ("n05", 1), ("n06", 1), ("n07", 1)]],
        used={"n00": FULL},
    ),
    Case(
        "all or nothing: the second pod set does not fit, so nothing is placed",
        [1, 1, 4],
        [gpu_pods(2, name="a"), gpu_pods(3, name="b")],
        None,
        reason=PlacementReason.GANG_INCOMPLETE,
    ),
    Case(
        "a later pod set sees the capacity the earlier one took",
        [1, 1, 4],
        [gpu_pods(2, name="a", required=BLOCK), gpu_pods(2, name="b", required=BLOCK)],
        [[("n00", 1), ("n01", 1)], [("n02", 1), ("n03", 1)]],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_placement_case(case: Case) -> None:
    nodes, spec = cluster(case.shape)
    _, ledger = tree_and_ledger(nodes, spec, case.used)
    result = find_placement(ledger, workload(*case.pod_sets))
    if case.expected is None:
        assert not result.admitted
        reasons = [o.diagnosis.reason for o in result.pod_sets if o.diagnosis is not None]
        assert case.reason in reasons
        assert all(not o.assignments for o in result.pod_sets)
    else:
        assert result.admitted, [o.diagnosis for o in result.pod_sets]
        assert [nodes_of(result, i) for i in range(len(case.pod_sets))] == case.expected


def test_ranks_are_contiguous_in_topology_order() -> None:
    nodes, spec = cluster([2, 2, 4])
    _, ledger = tree_and_ledger(nodes, spec)
    result = find_placement(ledger, workload(gpu_pods(8, gpus=4, required=SPINE)))
    ranks = [(a.first_rank, a.count) for a in result.pod_sets[0].assignments]
    assert ranks == [(0, 2), (2, 2), (4, 2), (6, 2)]
    assert [a.domain[BLOCK] for a in result.pod_sets[0].assignments] == ["b0"] * 4


def test_span_counts_domains_per_level() -> None:
    nodes, spec = cluster([2, 2, 4])
    _, ledger = tree_and_ledger(nodes, spec)
    result = find_placement(ledger, workload(gpu_pods(10, preferred=BLOCK)))
    assert result.pod_sets[0].span == {SPINE: 2, BLOCK: 3, HOSTNAME_LABEL: 10}


def test_diagnosis_names_closest_domain_and_relaxations() -> None:
    nodes, spec = cluster([2, 2, 4])
    _, ledger = tree_and_ledger(nodes, spec, {"n00": FULL, "n08": FULL, "n09": FULL})
    result = find_placement(ledger, workload(gpu_pods(5, required=BLOCK)))
    diagnosis = result.pod_sets[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.reason is PlacementReason.TOPOLOGY_UNSATISFIABLE
    assert diagnosis.numbers["max_pods_in_one_domain"] == 4
    assert diagnosis.numbers["closest_domain"] == "s0/b1"
    assert diagnosis.numbers["short_by"] == 1
    assert diagnosis.excluded_nodes == {"too_little_free_nvidia.com/gpu": 3}
    assert diagnosis.relaxations[0] == "require spine instead of block (s0 has room for all 5 pods)"
    assert any("span at least 2 block domains" in text for text in diagnosis.relaxations)
    assert diagnosis.relaxations[-1] == "reduce the count to 4 (room in s0/b1)"


def test_excluded_nodes_are_counted_per_cause() -> None:
    gpu_taint = Taint("nvidia.com/gpu", TaintEffect.NO_SCHEDULE, "true")
    tainted, spec = cluster([1, 1, 2], taints=[gpu_taint])
    plain, _ = cluster([1, 1, 2], labels={"pool": "cpu"})
    plain = [
        type(n)(f"c{i}", dict(n.labels) | {HOSTNAME_LABEL: f"c{i}"}, n.allocatable)
        for i, n in enumerate(plain)
    ]
    _, ledger = tree_and_ledger([*tainted, *plain], spec, {"c0": FULL})
    wants_gpu_pool = gpu_pods(4, node_selector={"pool": "gpu"})
    diagnosis = find_placement(ledger, workload(wants_gpu_pool)).pod_sets[0].diagnosis
    assert diagnosis is not None
    assert diagnosis.reason is PlacementReason.NO_ELIGIBLE_NODES
    assert diagnosis.excluded_nodes == {"taint_not_tolerated": 2, "selector_mismatch": 2}


def test_tolerations_and_affinity_select_nodes() -> None:
    gpu_taint = Taint("nvidia.com/gpu", TaintEffect.NO_SCHEDULE, "true")
    nodes, spec = cluster([1, 2, 2], taints=[gpu_taint])
    _, ledger = tree_and_ledger(nodes, spec)
    tolerate = Toleration("nvidia.com/gpu", TolerationOperator.EXISTS)
    only_b1 = NodeSelectorTerm((SelectorRequirement(BLOCK, SelectorOperator.IN, ("b1",)),))
    assert not find_placement(ledger, workload(gpu_pods(1))).admitted
    result = find_placement(
        ledger, workload(pod_set("w", 2, FULL, tolerations=[tolerate], affinity=[only_b1]))
    )
    assert nodes_of(result) == [("n02", 1), ("n03", 1)]


def test_pooled_leaves_report_domains_without_nodes() -> None:
    nodes, spec = cluster([2, 2, 4], hostname_level=False)
    _, ledger = tree_and_ledger(nodes, spec, {"n00": FULL})
    result = find_placement(ledger, workload(gpu_pods(6, gpus=4, required=BLOCK)))
    assignments = result.pod_sets[0].assignments
    assert [(a.node, dict(a.domain), a.count) for a in assignments] == [
        (None, {SPINE: "s0", BLOCK: "b0"}, 6)
    ]


def test_pooled_leaf_charge_keeps_every_node_non_negative() -> None:
    nodes, spec = cluster([1, 1, 3], hostname_level=False)
    _, ledger = tree_and_ledger(nodes, spec, {"n00": {NVIDIA_GPU: 6}})
    result, after = place_workload(ledger, workload(gpu_pods(9, gpus=2)))
    assert result.admitted
    gpu = after.tree.resource_column[NVIDIA_GPU]
    assert after.free[:, gpu].tolist() == [0, 0, 0]
    assert ledger.free[:, gpu].tolist() == [2, 8, 8]


def test_failed_placement_leaves_the_ledger_unchanged() -> None:
    nodes, spec = cluster([1, 1, 4])
    _, ledger = tree_and_ledger(nodes, spec)
    before = ledger.free.copy()
    result, after = place_workload(ledger, workload(gpu_pods(2, name="a"), gpu_pods(3, name="b")))
    assert not result.admitted
    assert after is ledger
    assert (ledger.free == before).all()


@pytest.mark.parametrize(
    ("pod_set_kwargs", "message"),
    [
        ({"required": "rack"}, "required topology 'rack' is not a level"),
        (
            {"required": BLOCK, "slices": [(SPINE, 2)]},
            "slice level spine is above the pod set's level",
        ),
        ({"required": BLOCK, "preferred": SPINE}, "preferred level spine is above required level"),
        (
            {"required": SPINE, "slices": [(HOSTNAME_LABEL, 2), (BLOCK, 1)]},
            "is not below the slice",
        ),
    ],
)
def test_invalid_requests_are_rejected_with_a_clear_message(
    pod_set_kwargs: dict[str, object], message: str
) -> None:
    nodes, spec = cluster([1, 2, 2])
    _, ledger = tree_and_ledger(nodes, spec)
    with pytest.raises(InvalidRequestError, match=message):
        find_placement(ledger, workload(gpu_pods(2, **pod_set_kwargs)))


def test_slice_size_must_divide_the_count() -> None:
    with pytest.raises(InvalidRequestError, match="slice size 3 does not divide the pod count"):
        gpu_pods(8, required=SPINE, slices=[(BLOCK, 3)])


def test_group_members_must_share_levels() -> None:
    nodes, spec = cluster([1, 2, 2])
    _, ledger = tree_and_ledger(nodes, spec)
    leader = pod_set("leader", 1, {CPU: "1"}, required=SPINE, group="g")
    workers = gpu_pods(2, required=BLOCK, group="g")
    with pytest.raises(InvalidRequestError, match="share group 'g'"):
        find_placement(ledger, workload(leader, workers))


def test_group_that_fits_only_apart_is_group_unsatisfiable() -> None:
    nodes, spec = cluster([1, 2, 2])
    _, ledger = tree_and_ledger(nodes, spec, {"n00": FULL})
    leader = pod_set("leader", 1, {NVIDIA_GPU: 8}, required=BLOCK, group="g")
    workers = gpu_pods(2, required=BLOCK, group="g")
    result = find_placement(ledger, workload(leader, workers))
    reasons = {o.name: o.diagnosis.reason for o in result.pod_sets if o.diagnosis}
    assert reasons["workers"] is PlacementReason.GROUP_UNSATISFIABLE


def test_group_members_may_prefer_different_levels_under_one_required_level() -> None:
    nodes, spec = cluster([2, 2, 4])
    _, ledger = tree_and_ledger(nodes, spec, {"n00": FULL})
    leader = pod_set("leader", 1, {CPU: "1"}, required=SPINE, group="g")
    workers = gpu_pods(6, required=SPINE, preferred=BLOCK, group="g")
    result = find_placement(ledger, workload(leader, workers))
    assert result.admitted
    spines = {a.domain[SPINE] for outcome in result.pod_sets for a in outcome.assignments}
    assert len(spines) == 1
