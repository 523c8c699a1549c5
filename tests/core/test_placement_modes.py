"""The placement modes the simulator compares topoq with (``PlacementMode``): first fit
places each pod on the first leaf with room in a topology-oblivious order; Kueue-like places
as topoq does but holds nothing for waiting jobs; topoq's own mode is what every other test
checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topoq.core.cycle import PlacementMode
from topoq.core.holdings import prepared_ledger
from topoq.core.placement import first_fit_fits, place_first_fit, place_workload
from topoq.core.placement.workload import first_fit_order
from topoq.domain.job import JobPhase
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [2, 4, 4]  # 2 spines x 4 blocks x 4 nodes of 8 GPUs
BLOCK = "block"


def _cluster(mode: PlacementMode, *teams_: object) -> Cluster:
    rules = policy(*(teams_ or (team("a", 256),)))  # type: ignore[arg-type]
    return replace(Cluster.of(SHAPE, rules), placement=mode)


def test_first_fit_takes_the_first_leaves_with_room_in_a_topology_oblivious_order() -> None:
    c = _cluster(PlacementMode.FIRST_FIT)
    order = first_fit_order(c.tree).tolist()
    assert sorted(order) == list(range(len(c.tree.nodes)))
    assert order != sorted(order)  # not the tree's (topological) order
    assert first_fit_order(c.tree) is first_fit_order(c.tree)  # memoized, the same every time
    ledger = prepared_ledger(c.tree, [], None).ledger()
    gang = job("g", "a", 4).spec.workload
    placed, after = place_first_fit(ledger, gang)
    assert placed.admitted
    nodes = sorted(a.node for o in placed.pod_sets for a in o.assignments)
    assert nodes == sorted(c.tree.nodes[leaf].name for leaf in order[:4])
    assert int(after.free.sum()) < int(ledger.free.sum())
    assert int(ledger.free.sum()) == int(prepared_ledger(c.tree, [], None).ledger().free.sum())
    tight, _ = place_workload(ledger, gang)
    assert tight.pod_sets[0].span[BLOCK] == 1
    assert placed.pod_sets[0].span[BLOCK] > 1  # oblivious of the blocks
    too_big = job("huge", "a", 33).spec.workload
    assert not first_fit_fits(ledger, too_big)
    refused, same = place_first_fit(ledger, too_big)
    assert not refused.admitted and same is ledger


@pytest.mark.parametrize("mode", list(PlacementMode))
def test_every_mode_admits_a_gang_all_or_nothing(mode: PlacementMode) -> None:
    c = _cluster(mode)
    c.submit(job("big", "a", 24), job("rest", "a", 12))
    c.cycle()
    assert c.phase("big") is JobPhase.RUNNING
    assert c.phase("rest") is JobPhase.PENDING  # 8 nodes left: none of its pods start
    assert not any(a.job == "rest" for a in c.last.admissions)


def test_kueue_like_holds_no_quota_for_a_waiting_queue_head() -> None:
    outcomes = {}
    for mode in (PlacementMode.TOPOQ, PlacementMode.KUEUE_LIKE):
        c = _cluster(mode, team("a", 16, borrow_gpus=0), team("b", 240))
        c.submit(job("running", "a", 1))
        c.cycle()
        c.now = 10.0
        c.submit(job("head", "a", 2), job("small", "a", 1))  # head: 16 GPUs, 8 are free
        c.cycle()
        outcomes[mode] = (c.phase("head"), c.phase("small"), c.reason("small"))
    assert outcomes[PlacementMode.TOPOQ] == (
        JobPhase.PENDING,
        JobPhase.PENDING,
        "RESERVED_FOR_LARGER_GANG",  # the team's quota is held for its head
    )
    assert outcomes[PlacementMode.KUEUE_LIKE][:2] == (JobPhase.PENDING, JobPhase.RUNNING)
