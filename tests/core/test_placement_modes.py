"""The placement modes the simulator compares topoq with (``PlacementMode``): first fit
places each pod on the first leaf with room in a topology-oblivious order; Kueue-like places
as topoq does but holds nothing for waiting jobs; topoq's own mode is what every other test
checks."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest

from topoq.core.cycle import PlacementMode
from topoq.core.holdings import prepared_ledger
from topoq.core.placement import first_fit_fits, place_first_fit, place_workload
from topoq.core.placement.workload import _fewest_holding, first_fit_order
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


def test_a_placement_records_the_fewest_domains_the_free_capacity_allowed() -> None:
    c = _cluster(PlacementMode.FIRST_FIT)
    c.submit(job("scatter", "a", 20))  # first fit leaves free nodes here and there
    c.cycle()
    ledger = prepared_ledger(c.tree, list(c.jobs.values()), None).ledger()
    gpu = c.tree.resource_column["nvidia.com/gpu"]
    free_nodes = (ledger.free[:, gpu] == 8).astype(int)
    gang = job("g", "a", 6).spec.workload

    def fewest(level: int) -> int:  # the roomiest domains first, by brute force
        starts = c.tree.levels[level].node_start
        rooms = sorted((free_nodes[a:b].sum() for a, b in pairwise(starts)), reverse=True)
        return next(k for k in range(1, len(rooms) + 1) if sum(rooms[:k]) >= 6)

    expected = {index.label: fewest(level) for level, index in enumerate(c.tree.levels)}
    assert expected["block"] > 1  # no block has six free nodes left
    for place in (place_workload, place_first_fit):
        placed, _ = place(ledger, gang)
        assert placed.pod_sets[0].best_span == expected
    topoq_s, _ = place_workload(ledger, gang)
    assert topoq_s.pod_sets[0].span == expected  # topoq: as tight as the free capacity allowed


@pytest.mark.parametrize(
    ("rooms", "pods", "fewest"),
    [
        ([0, 0, 0], 1, None),
        ([3, 1, 0], 3, 1),
        ([1] * 10, 7, 7),
        ([2, 5, 1, 5, 3], 11, 3),  # 5 + 5 + 3
        ([2, 5, 1, 5, 3], 16, 5),
        ([2, 5, 1, 5, 3], 17, None),
    ],
)
def test_the_fewest_domains_are_the_roomiest_first(
    rooms: list[int], pods: int, fewest: int | None
) -> None:
    assert _fewest_holding(np.asarray(rooms, dtype=np.int64), pods) == fewest
