"""Compactness at every level: once the domains of one level are chosen, the pods use as few
domains as possible one level down. Checked against an exhaustive search on small trees."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement
from topoq.core.tree import build_tree
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec, WorkloadSpec
from topoq.testing.builders import cluster, gpu_pods

Path = tuple[str, ...]
Placement = Mapping[Path, int]
"""Pods per leaf (the leaf's label values from the top level down)."""


def placed(spec: TopologySpec, result: PlacementResult) -> dict[Path, int]:
    counts: Counter[Path] = Counter()
    for assignment in result.pod_sets[0].assignments:
        counts[tuple(assignment.domain[label] for label in spec.levels)] += assignment.count
    return dict(counts)


def spans(placement: Placement, depth: int) -> list[int]:
    return [len(domain_counts(placement, level)) for level in range(depth)]


def domain_counts(placement: Placement, level: int) -> dict[Path, int]:
    counts: Counter[Path] = Counter()
    for leaf, pods in placement.items():
        if pods:
            counts[leaf[: level + 1]] += pods
    return dict(counts)


def test_split_gang_uses_as_few_hosts_as_the_blocks_allow() -> None:
    """The issue's case: 12 pods in slices of 3 per host, block preferred, neither block holds
    all. b0 has three hosts with room for one slice each, b1 one host with room for two.
    Taking b0 whole (3 hosts) and one slice in b1 uses 4 hosts; 2 slices in each block use 3."""
    nodes, spec = cluster([2, 3], levels=["block"])
    used = {"n00": 5, "n01": 5, "n02": 5, "n03": 2, "n04": 8, "n05": 8}
    ledger = CapacityLedger.with_usage(
        build_tree(nodes, spec),
        {name: Resources({NVIDIA_GPU: gpus}) for name, gpus in used.items()},
    )
    work = WorkloadSpec(
        "job",
        (gpu_pods(12, gpus=1, preferred="block", slices=[(HOSTNAME_LABEL, 3)]),),
    )
    result = find_placement(ledger, work)
    assert result.admitted
    taken = placed(spec, result)
    assert spans(taken, spec.depth) == [2, 3]
    assert taken == {("b0", "n00"): 3, ("b0", "n01"): 3, ("b1", "n03"): 6}


def test_one_block_holding_the_gang_still_uses_the_fewest_hosts() -> None:
    nodes, spec = cluster([2, 4], levels=["block"])
    used = {"n00": 6, "n01": 6, "n02": 6, "n03": 6, "n04": 4, "n05": 4, "n06": 8, "n07": 8}
    ledger = CapacityLedger.with_usage(
        build_tree(nodes, spec),
        {name: Resources({NVIDIA_GPU: gpus}) for name, gpus in used.items()},
    )
    result = find_placement(ledger, WorkloadSpec("job", (gpu_pods(8, gpus=1, preferred="block"),)))
    assert spans(placed(spec, result), spec.depth) == [1, 2]


# --- the exhaustive comparison -------------------------------------------------------------


@st.composite
def small_cases(
    draw: st.DrawFn,
) -> tuple[list[NodeSpec], TopologySpec, dict[str, Resources], PodSetSpec]:
    shape = draw(
        st.sampled_from(
            [[2, 2], [2, 3], [3, 2], [2, 4], [2, 2, 2], [3, 1, 2], [2, 1, 3], [1, 2, 3]]
        )
    )
    nodes, spec = cluster(shape, hostname_level=draw(st.booleans()) or len(shape) == 2)
    used = {
        node.name: Resources({NVIDIA_GPU: draw(st.sampled_from([0, 2, 4, 5, 6, 7, 8]))})
        for node in nodes
    }
    levels = spec.levels
    gpus = draw(st.sampled_from([1, 2, 4]))
    mode = draw(st.sampled_from(["required", "preferred", "none"]))
    at = draw(st.integers(0, len(levels) - 1))
    topology: dict[str, object] = {mode: levels[at]} if mode != "none" else {}
    size = draw(st.sampled_from([1, 1, 2, 3]))
    count = size * draw(st.integers(1, 10 // size))
    if size > 1:
        floor = at if mode != "none" else 0
        topology["slices"] = [(levels[draw(st.integers(floor, len(levels) - 1))], size)]
    elif draw(st.booleans()):
        topology["spread"] = (
            levels[draw(st.integers(0, len(levels) - 1))],
            draw(st.integers(1, 4)),
        )
    return nodes, spec, used, gpu_pods(count, gpus=gpus, **topology)


def leaf_rooms(
    nodes: list[NodeSpec], spec: TopologySpec, used: dict[str, Resources], gpus: int
) -> dict[Path, int]:
    """Pods that fit per leaf, from the free GPUs (pooled over a leaf's nodes)."""
    free: Counter[Path] = Counter()
    for node in nodes:
        leaf = tuple(node.labels[label] for label in spec.levels)
        free[leaf] += 8 - used[node.name].amount(NVIDIA_GPU)
    return {leaf: gpus_free // gpus for leaf, gpus_free in sorted(free.items())}


def units_and_caps(spec: TopologySpec, pod_set: PodSetSpec) -> tuple[list[int], list[int | None]]:
    request = pod_set.topology
    units = [1] * spec.depth
    for layer in request.slices:
        for level in range(spec.levels.index(layer.level) + 1):
            units[level] = layer.size
    caps: list[int | None] = [None] * spec.depth
    if request.spread is not None:
        for level in range(spec.levels.index(request.spread.level), spec.depth):
            caps[level] = request.spread.max_pods_per_domain
    return units, caps


def every_placement(rooms: dict[Path, int], pods: int, unit: int) -> Iterator[dict[Path, int]]:
    leaves = list(rooms)
    left_after = [sum(rooms[leaf] for leaf in leaves[i + 1 :]) for i in range(len(leaves))]

    def walk(index: int, remaining: int, chosen: dict[Path, int]) -> Iterator[dict[Path, int]]:
        if index == len(leaves):
            if remaining == 0:
                yield dict(chosen)
            return
        leaf = leaves[index]
        for take in range(0, min(rooms[leaf], remaining) + 1, unit):
            if remaining - take <= left_after[index]:
                chosen[leaf] = take
                yield from walk(index + 1, remaining - take, chosen)
        chosen.pop(leaf, None)

    yield from walk(0, pods, {})


def valid(
    placement: Placement, spec: TopologySpec, pod_set: PodSetSpec, units: list[int], caps: list
) -> bool:  # type: ignore[type-arg]
    for level in range(spec.depth):
        for pods in domain_counts(placement, level).values():
            if pods % units[level] or (caps[level] is not None and pods > caps[level]):
                return False
    required = pod_set.topology.required
    return required is None or len(domain_counts(placement, spec.levels.index(required))) == 1


@settings(max_examples=250, deadline=None)
@given(small_cases(), st.data())
def test_each_level_uses_the_fewest_domains_given_the_level_above(
    case: tuple,  # type: ignore[type-arg]
    data: st.DataObject,
) -> None:
    """For each level j (from the whole tree down): among all placements that use only the
    domains topoq chose at level j — and give each domain where a slice ends (its unit is larger
    than the unit below) the pods topoq gave it — none uses fewer domains at level j + 1. A
    restart's previous nodes (drawn at random) only break ties: the property still holds."""
    nodes, spec, used, pod_set = case
    names = sorted(node.name for node in nodes)
    previous = data.draw(st.sets(st.sampled_from(names), max_size=len(names)))
    units, caps = units_and_caps(spec, pod_set)
    rooms = leaf_rooms(nodes, spec, used, pod_set.requests.amount(NVIDIA_GPU))
    placements = [
        p
        for p in every_placement(rooms, pod_set.count, units[-1])
        if valid(p, spec, pod_set, units, caps)
    ]
    ledger = CapacityLedger.with_usage(build_tree(nodes, spec), used)
    result = find_placement(ledger, WorkloadSpec("job", (pod_set,)), previous_nodes=previous)
    assert result.admitted == bool(placements)
    if not result.admitted:
        return
    mine = placed(spec, result)
    assert any(mine == {leaf: pods for leaf, pods in p.items() if pods} for p in placements)
    for level in range(-1, spec.depth - 1):
        candidates = [p for p in placements if _same_above(p, mine, level, units)]
        fewest = min(len(domain_counts(p, level + 1)) for p in candidates)
        assert len(domain_counts(mine, level + 1)) == fewest, (level, mine)


def _same_above(placement: Placement, mine: Placement, level: int, units: list[int]) -> bool:
    """Uses only the domains ``mine`` uses at ``level``, with the same pods where slices end."""
    if level < 0:
        return True
    if not set(domain_counts(placement, level)) <= set(domain_counts(mine, level)):
        return False
    return all(
        domain_counts(placement, above) == domain_counts(mine, above)
        for above in range(level + 1)
        if units[above] > units[above + 1]
    )
