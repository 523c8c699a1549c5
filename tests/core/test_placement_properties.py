"""Invariants of placement over random clusters, usage and requests (hypothesis)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.tree import build_tree
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec, WorkloadSpec
from topoq.testing.builders import cluster, gpu_pods


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[list[NodeSpec], TopologySpec, dict[str, Resources], WorkloadSpec]:
    depth = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 3)) for _ in range(depth)] + [draw(st.integers(1, 4))]
    nodes, spec = cluster(shape, hostname_level=draw(st.booleans()))
    used = {
        node.name: Resources({NVIDIA_GPU: draw(st.integers(0, 8))})
        for node in nodes
        if draw(st.booleans())
    }
    pod_sets = [draw(pod_sets_for(spec, f"ps{i}")) for i in range(draw(st.integers(1, 2)))]
    return nodes, spec, used, WorkloadSpec("job", tuple(pod_sets))


@st.composite
def pod_sets_for(draw: st.DrawFn, spec: TopologySpec, name: str) -> PodSetSpec:
    levels = spec.levels
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    mode = draw(st.sampled_from(["required", "preferred", "both", "none"]))
    required_at = draw(st.integers(0, len(levels) - 1))
    preferred_at = draw(st.integers(required_at, len(levels) - 1))
    topology: dict[str, object] = {}
    if mode in ("required", "both"):
        topology["required"] = levels[required_at]
    if mode in ("preferred", "both"):
        topology["preferred"] = levels[preferred_at]
    size = draw(st.sampled_from([1, 2, 3]))
    count = size * draw(st.integers(1, 5))
    if size > 1 and draw(st.booleans()):
        floor = (
            required_at
            if mode in ("required", "both")
            else (preferred_at if mode == "preferred" else 0)
        )
        topology["slices"] = [(levels[draw(st.integers(floor, len(levels) - 1))], size)]
    elif draw(st.booleans()):
        topology["spread"] = (
            levels[draw(st.integers(0, len(levels) - 1))],
            draw(st.integers(1, 3)),
        )
    return gpu_pods(count, gpus=gpus, name=name, **topology)


def place(
    nodes: list[NodeSpec], spec: TopologySpec, used: dict[str, Resources], work: WorkloadSpec
) -> tuple[PlacementResult, CapacityLedger, CapacityLedger]:
    tree = build_tree(nodes, spec)
    ledger = CapacityLedger.with_usage(tree, used)
    result, after = place_workload(ledger, work)
    return result, ledger, after


def pod_domains(result: PlacementResult, index: int, label: str) -> list[str]:
    """The ``label`` value of every pod of pod set ``index``, in rank order."""
    return [a.domain[label] for a in result.pod_sets[index].assignments for _ in range(a.count)]


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_never_over_capacity_and_all_or_nothing(scenario: tuple) -> None:  # type: ignore[type-arg]
    nodes, spec, used, work = scenario
    result, before, after = place(nodes, spec, used, work)
    assert (after.free >= 0).all()
    assert (after.free <= before.free).all()
    if result.admitted:
        for outcome, pod_set in zip(result.pod_sets, work.pod_sets, strict=True):
            assert sum(a.count for a in outcome.assignments) == pod_set.count
            ranks = [a.first_rank for a in outcome.assignments]
            assert ranks == sorted(ranks) and ranks[0] == 0
        gpu = before.tree.resource_column[NVIDIA_GPU]
        taken = int((before.free[:, gpu] - after.free[:, gpu]).sum())
        assert taken == sum(p.count * p.requests.amount(NVIDIA_GPU) for p in work.pod_sets)
    else:
        assert all(not outcome.assignments for outcome in result.pod_sets)
        assert (after.free == before.free).all()


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_required_domain_slices_and_spread_hold(scenario: tuple) -> None:  # type: ignore[type-arg]
    nodes, spec, used, work = scenario
    result, _, _ = place(nodes, spec, used, work)
    if not result.admitted:
        return
    for index, pod_set in enumerate(work.pod_sets):
        request = pod_set.topology
        if request.required is not None:
            level = spec.levels.index(request.required)
            paths = {
                tuple(a.domain[label] for label in spec.levels[: level + 1])
                for a in result.pod_sets[index].assignments
            }
            assert len(paths) == 1
        for layer in request.slices:
            level = spec.levels.index(layer.level)
            per_pod = [
                tuple(a.domain[label] for label in spec.levels[: level + 1])
                for a in result.pod_sets[index].assignments
                for _ in range(a.count)
            ]
            for start in range(0, len(per_pod), layer.size):
                assert len(set(per_pod[start : start + layer.size])) == 1
        if request.spread is not None:
            level = spec.levels.index(request.spread.level)
            per_pod = [
                tuple(a.domain[label] for label in spec.levels[: level + 1])
                for a in result.pod_sets[index].assignments
                for _ in range(a.count)
            ]
            assert max(Counter(per_pod).values()) <= request.spread.max_pods_per_domain


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_same_input_gives_the_same_placement_whatever_the_node_order(
    scenario: tuple,
    shuffler: random.Random,  # type: ignore[type-arg]
) -> None:
    nodes, spec, used, work = scenario
    first, _, _ = place(nodes, spec, used, work)
    shuffled = list(nodes)
    shuffler.shuffle(shuffled)
    second, _, _ = place(shuffled, spec, used, work)
    assert first == second


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_required_gang_is_placed_whenever_some_domain_has_room(scenario: tuple) -> None:  # type: ignore[type-arg]
    nodes, spec, used, work = scenario
    pod_set = work.pod_sets[0]
    if pod_set.topology.required is None or pod_set.topology.slices or pod_set.topology.spread:
        return
    if spec.levels[-1] != HOSTNAME_LABEL:
        return
    result, _, _ = place(nodes, spec, used, WorkloadSpec("one", (pod_set,)))
    level = spec.levels.index(pod_set.topology.required)
    gpus = pod_set.requests.amount(NVIDIA_GPU)
    room: Counter[tuple[str, ...]] = Counter()
    for node in nodes:  # the straightforward scan: every node of every domain
        free = 8 - used.get(node.name, Resources()).amount(NVIDIA_GPU)
        room[tuple(node.labels[label] for label in spec.levels[: level + 1])] += (
            max(free, 0) // gpus
        )
    assert result.admitted == (max(room.values()) >= pod_set.count)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(1, 12), st.integers(0, 2), st.data())
def test_group_members_land_in_one_domain_of_their_level(
    blocks: int, workers: int, level: int, data: st.DataObject
) -> None:
    nodes, spec = cluster([2, blocks, 4])
    used = {
        node.name: Resources({NVIDIA_GPU: data.draw(st.sampled_from([0, 0, 4, 8]))})
        for node in nodes
    }
    label = spec.levels[level]
    leader = gpu_pods(
        1, gpus=data.draw(st.sampled_from([1, 8])), name="leader", required=label, group="g"
    )
    members = gpu_pods(
        workers, gpus=data.draw(st.sampled_from([2, 8])), name="workers", required=label, group="g"
    )
    result, _, after = place(nodes, spec, used, WorkloadSpec("job", (leader, members)))
    assert (after.free >= 0).all()
    if result.admitted:
        paths = {
            tuple(a.domain[name] for name in spec.levels[: level + 1])
            for outcome in result.pod_sets
            for a in outcome.assignments
        }
        assert len(paths) == 1
