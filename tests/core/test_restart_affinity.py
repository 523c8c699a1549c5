"""A gang requeued after a node failure prefers the domains it ran in."""

from __future__ import annotations

from topoq.core.ledger import CapacityLedger
from topoq.core.lifecycle import requeued
from topoq.core.placement import find_placement
from topoq.core.tree import build_tree
from topoq.domain.decisions import Requeue, RequeueCause
from topoq.domain.job import Allocation, JobPhase
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec
from topoq.testing.builders import BLOCK, cluster, gpu_pods
from topoq.testing.governance import job


def blocks_of(result: object) -> set[str]:
    return {a.domain[BLOCK] for a in result.pod_sets[0].assignments}  # type: ignore[attr-defined]


def ledger_with(used: dict[str, int]) -> CapacityLedger:
    nodes, spec = cluster([1, 2, 4])
    return CapacityLedger.with_usage(
        build_tree(nodes, spec), {n: Resources({NVIDIA_GPU: g}) for n, g in used.items()}
    )


def test_a_restart_keeps_its_block_over_a_tighter_one() -> None:
    ledger = ledger_with({"n00": 8, "n01": 8, "n04": 8})  # b0 room 2, b1 room 3
    work = WorkloadSpec("g", (gpu_pods(2, required=BLOCK),))
    assert blocks_of(find_placement(ledger, work)) == {"b0"}  # tighter, nothing to remember
    restarted = find_placement(ledger, work, previous_nodes={"n05", "n06", "n99"})
    assert blocks_of(restarted) == {"b1"}
    nodes = {a.node for a in restarted.pod_sets[0].assignments}
    assert nodes == {"n05", "n06"}  # and its own hosts inside the block


def test_a_restart_never_takes_a_worse_level_for_its_old_block() -> None:
    ledger = ledger_with({"n04": 8, "n05": 8, "n06": 8})  # b1 room 1, b0 room 4
    work = WorkloadSpec("g", (gpu_pods(3, preferred=BLOCK),))
    restarted = find_placement(ledger, work, previous_nodes={"n04", "n05", "n07"})
    assert blocks_of(restarted) == {"b0"}  # one block beats splitting to stay in b1


def test_a_node_failure_requeue_remembers_the_nodes_other_requeues_do_not() -> None:
    nodes, spec = cluster([1, 2, 4])
    ledger = CapacityLedger.empty_cluster(build_tree(nodes, spec))
    work = WorkloadSpec("g", (gpu_pods(2, required=BLOCK),))
    placement = find_placement(ledger, work)
    held = {a.node: Resources({NVIDIA_GPU: 8}) for a in placement.pod_sets[0].assignments}
    running = job("g", "a", 2, required=BLOCK)
    running = type(running)(
        running.spec,
        phase=JobPhase.RUNNING,
        allocation=Allocation(placement, held, {}),  # type: ignore[arg-type]
    )
    back = requeued(running, Requeue(running.id, RequeueCause.NODE_FAILED, "node failed"), 5.0)
    assert back.phase is JobPhase.PENDING and back.allocation is None
    assert back.previous_nodes == frozenset(held)
