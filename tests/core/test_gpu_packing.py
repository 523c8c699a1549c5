"""Packing a single GPU pod by fragmentation (issue 14 §4 and §8; docs/gpu-sharing.md, "Packing
by fragmentation"): on a cluster with nodes open to GPU shares, a pod set of one GPU pod takes
the node and device that grow the cluster's fragmentation least against the mix of the pods its
unfinished jobs ask for — not the tightest device, which can leave a sliver no typical pod
uses. Gangs, pods without GPUs and clusters with no open node are placed as before."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.cycle import PlacementMode
from topoq.core.gpu_devices import (
    GpuAsk,
    fragmentation,
    fragmentation_points,
)
from topoq.core.ledger import CapacityLedger
from topoq.core.placement.packing import device_room, pack_one, packing_for, task_class
from topoq.core.placement.workload import place_workload
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.gpu_share import GPU_MODEL_LABEL, GPU_SHARE, GPU_SHARING_LABEL
from topoq.domain.job import JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import PodSetSpec
from topoq.testing.builders import cluster, node_resources, pod_set, tree_and_ledger, workload
from topoq.testing.governance import Cluster, job, policy, team

SHARING = {GPU_SHARING_LABEL: "true"}


def share(name: str, milli: int, pods: int = 1, **selector: str) -> PodSetSpec:
    return pod_set(name, pods, {GPU_SHARE: milli, "cpu": 1}, node_selector=selector or None)


def gpu_pod(name: str, milli: int) -> PodSetSpec:
    """A pod of ``milli`` thousandths of a GPU: a share, or one whole GPU at 1,000."""
    if milli < 1000:
        return share(name, milli)
    return pod_set(name, 1, {NVIDIA_GPU: 1, "cpu": 1})


def picks(result: PlacementResult) -> list[tuple[str | None, tuple[tuple[int, ...], ...]]]:
    return [(a.node, a.gpu_devices) for outcome in result.pod_sets for a in outcome.assignments]


def free_devices(ledger: CapacityLedger, node: int) -> list[int]:
    return [int(value) for value in ledger.free[node, ledger.tree.device_columns]]


def slivered() -> tuple[TopologyTree, CapacityLedger]:
    """Two open nodes of two GPUs: half of node 0's device 0 taken, 0.3 of node 1's."""
    tree, ledger = tree_and_ledger(*cluster([1, 2], resources=node_resources(2), labels=SHARING))
    for milli, node in ((500, "n00"), (300, "n01")):
        on = {"kubernetes.io/hostname": node}
        _, ledger = place_workload(ledger, workload(share("x", milli, **on)))
    assert free_devices(ledger, 0) == [500, 1000] and free_devices(ledger, 1) == [700, 1000]
    return tree, ledger


def test_a_share_takes_a_whole_device_where_the_tightest_would_leave_a_sliver() -> None:
    tree, ledger = slivered()
    asked = workload(share("p", 300), name="p")
    tightest, left_tight = place_workload(ledger, asked)
    assert picks(tightest) == [("n00", ((0,),))]  # 500 -> 200: too small for any typical pod

    ledger.packing = packing_for(tree, [(share("a", 500), 4), (share("b", 300), 4)])
    assert ledger.packing is not None
    packed, left_packed = place_workload(ledger, asked)
    assert picks(packed) == [("n00", ((1,),))]  # a whole device: 700 left holds either
    assert free_devices(left_packed, 0) == [500, 700]
    mix = ledger.packing.mix
    assert (
        fragmentation(device_room(left_packed), mix).sum()
        < fragmentation(device_room(left_tight), mix).sum()
    )


def test_gangs_and_clusters_with_no_open_node_are_placed_as_before() -> None:
    tree, ledger = slivered()
    ledger.packing = packing_for(tree, [(share("a", 500), 4), (share("b", 300), 4)])
    gang = workload(share("g", 300, pods=2), name="g")
    assert picks(place_workload(ledger, gang)[0]) == picks(
        place_workload(_unpacked(ledger), gang)[0]
    )
    closed = build_tree(*cluster([1, 2], resources=node_resources(2)))
    assert packing_for(closed, [(pod_set("w", 1, {NVIDIA_GPU: 1}), 1)]) is None
    assert packing_for(tree, [(pod_set("c", 1, {"cpu": 1}), 3)]) is None  # no GPU pod: no mix


def test_a_cpu_pod_keeps_off_the_cpu_that_a_nodes_free_gpus_need() -> None:
    """n00's GPUs are taken, n01's are free with 8 cores left. A 6-core pod fits either; the
    tightest is n01, where the 2 cores it leaves strand both GPUs for the typical 3-core GPU
    pod. Packed, it goes to n00, whose GPUs are gone anyway."""
    tree, ledger = tree_and_ledger(
        *cluster([1, 2], resources=node_resources(2, cpu="16"), labels=SHARING)
    )
    for name, requests, node in (
        ("w", {NVIDIA_GPU: 2, "cpu": 2}, "n00"),
        ("c", {"cpu": 8}, "n01"),
    ):
        on = {"kubernetes.io/hostname": node}
        ledger = place_workload(ledger, workload(pod_set(name, 1, requests, node_selector=on)))[1]
    asked = workload(pod_set("cpu", 1, {"cpu": 6}), name="cpu")
    assert picks(place_workload(ledger, asked)[0]) == [("n01", ())]
    ledger.packing = packing_for(tree, [(pod_set("g", 1, {NVIDIA_GPU: 1, "cpu": 3}), 5)])
    assert picks(place_workload(ledger, asked)[0]) == [("n00", ())]


def _unpacked(ledger: CapacityLedger) -> CapacityLedger:
    copy = ledger.scratch()
    copy.packing = None
    return copy


def test_a_pods_task_class_accepts_the_gpu_models_its_selector_leaves_it() -> None:
    nodes, spec = cluster([1, 3], resources=node_resources(2), labels=SHARING)
    models = ["A100", "H100", "H100"]
    nodes = [
        NodeSpec(n.name, {**n.labels, GPU_MODEL_LABEL: model}, n.allocatable, n.taints)
        for n, model in zip(nodes, models, strict=True)
    ]
    tree = build_tree(nodes, spec)
    assert task_class(tree, share("any", 250)) == (1000, 1, 250, frozenset())
    h100 = task_class(tree, share("h", 250, **{GPU_MODEL_LABEL: "H100"}))
    assert h100 is not None and h100[3] == frozenset({1})
    whole = task_class(tree, pod_set("w", 1, {NVIDIA_GPU: 2, "cpu": 4}))
    assert whole == (4000, 2, 1000, frozenset())
    assert task_class(tree, pod_set("c", 1, {"cpu": 4})) == (4000, 0, 0, frozenset())
    room = device_room(CapacityLedger.empty_cluster(tree))
    assert room.model.tolist() == [0, 1, 1]


def test_the_device_room_counts_closed_nodes_by_their_whole_free_gpus() -> None:
    opened, spec = cluster([1, 1], resources=node_resources(2), labels=SHARING)
    plain = NodeSpec(NodeName("plain"), {"spine": "s0", "kubernetes.io/hostname": "plain"})
    plain = NodeSpec(plain.name, plain.labels, node_resources(4))
    tree = build_tree([*opened, plain], spec)
    ledger = CapacityLedger.with_usage(
        tree, {"plain": Resources.parse({NVIDIA_GPU: 1})}, strict=True
    )
    _, ledger = place_workload(ledger, workload(share("x", 250)))
    room = device_room(ledger)
    assert room.devices.tolist() == [[750, 1000, 0, 0], [1000, 1000, 1000, 0]]


@settings(max_examples=40, deadline=None)
@given(
    taken=st.lists(st.sampled_from([100, 250, 300, 500, 700, 1000]), max_size=10),
    mix=st.lists(st.sampled_from([100, 250, 500, 1000]), min_size=1, max_size=6),
    asked=st.sampled_from([100, 250, 300, 500, 1000]),
)
def test_the_packed_choice_scores_best_of_every_node_and_device_that_holds_the_pod(
    taken: list[int], mix: list[int], asked: int
) -> None:
    """Against a brute force: fragmentation measured before and after each possible choice."""
    tree, ledger = tree_and_ledger(*cluster([1, 3], resources=node_resources(4), labels=SHARING))
    for at, milli in enumerate(taken):
        ledger = place_workload(ledger, workload(gpu_pod(f"t{at}", milli), name=f"t{at}"))[1]
    ledger.packing = packing_for(tree, [(gpu_pod(f"m{at}", m), 1) for at, m in enumerate(mix)])
    assert ledger.packing is not None
    room = device_room(ledger)
    ask = GpuAsk(cpu=1000, count=1, milli=asked) if asked < 1000 else GpuAsk(1000, 0, 1, 1000)
    before = fragmentation(room, ledger.packing.mix)
    options = {}
    for node, device in itertools.product(range(3), range(4)):
        if asked < 1000 and room.devices[node, device] < asked:
            continue
        if asked == 1000 and (device or not (room.devices[node] == 1000).any()):
            continue
        chosen = None if asked == 1000 else device
        after = room.taking(node, ask, room.devices_for(node, ask, chosen))
        grown = fragmentation(after, ledger.packing.mix)[node] - before[node]
        options[(node, chosen)] = int(fragmentation_points(np.asarray([grown]))[0])
    one = gpu_pod("p", asked)
    fits = np.asarray([1 if any(n == node for n, _ in options) else 0 for node in range(3)])
    packed = pack_one(ledger, one, fits)
    if not options:
        assert packed is None
        return
    assert packed is not None
    assert options[packed] == max(options.values())


def shares(job_id: str, milli: int) -> JobView:
    """One pod of ``milli`` thousandths of a GPU, for team nlp."""
    made = job(job_id, "nlp", 1)
    one = replace(made.spec.workload.pod_sets[0], requests=Resources({GPU_SHARE: milli}))
    return replace(made, spec=replace(made.spec, workload=workload(one, name=job_id)))


def devices_taken(result: CycleResult) -> dict[str, list[tuple[str | None, tuple]]]:
    return {admit.job: picks(admit.allocation.placement) for admit in result.admissions}


def test_a_cycle_packs_a_waiting_share_by_the_mix_of_the_jobs_it_sees() -> None:
    """Through the cycle: half a GPU runs on device 0 of the first node; then 0.3 and 0.5
    wait. The tightest device would take the 0.5 left beside the first for the 0.3 (leaving
    0.2 no pod of the mix uses) and put the second half on a whole device. Packed by the mix
    of the jobs the cycle sees, the 0.3 takes a whole device and the second half fills the
    first device."""
    rules = policy(team("nlp", 16))
    cluster = Cluster.of([1, 1, 2], rules, shares("half", 500), labels=SHARING)
    assert devices_taken(cluster.cycle()) == {"half": [("n00", ((0,),))]}
    cluster.now = 1.0
    cluster.submit(shares("third", 300))
    cluster.now = 2.0
    cluster.submit(shares("half-2", 500))
    assert devices_taken(cluster.cycle()) == {
        "third": [("n00", ((1,),))],
        "half-2": [("n00", ((0,),))],
    }


def test_the_kueue_like_baseline_does_not_pack_by_fragmentation() -> None:
    """Kueue packs no share by fragmentation: the simulator's kueue-like placement puts the
    0.3 on the tightest device, beside the half."""
    rules = policy(team("nlp", 16))
    cluster = Cluster.of([1, 1, 2], rules, shares("half", 500), labels=SHARING)
    cluster.placement = PlacementMode.KUEUE_LIKE
    cluster.cycle()
    cluster.now = 1.0
    cluster.submit(shares("third", 300))
    cluster.now = 2.0
    cluster.submit(shares("half-2", 500))
    assert devices_taken(cluster.cycle()) == {
        "third": [("n00", ((0,),))],  # 0.2 left beside the first half
        "half-2": [("n00", ((1,),))],
    }
