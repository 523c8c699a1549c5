"""``backfill.nodes_to_hold``: the fewest of the candidates, earliest-freeing first, on which a
workload fits once they are empty — the same answer as trying every count from none upwards,
whether the search starts at the lower bound the workload's size gives, and whether the
answer is worked out or remembered from a cycle that asked the same."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.backfill import NEVER, first_fitting, nodes_to_hold
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.tree import build_tree
from topoq.testing.builders import cluster, gpu_pods, workload

TREE = build_tree(*cluster([2, 2, 4]))  # 16 nodes of 8 GPUs


def by_every_count(candidates: np.ndarray, free_at: np.ndarray, asked: object) -> object:
    order = candidates[np.lexsort((candidates, free_at[candidates]))]
    for count in range(len(order) + 1):
        free = np.zeros_like(TREE.capacity)
        free[order[:count]] = TREE.capacity[order[:count]]
        if place_workload(CapacityLedger(TREE, free), asked)[0].admitted:  # type: ignore[arg-type]
            held = np.sort(order[:count])
            start = float(free_at[held].max()) if len(held) else NEVER
            return held.tolist(), None if start == NEVER else start
    return None


@settings(max_examples=150, deadline=None)
@given(
    pods=st.integers(1, 12),
    gpus=st.sampled_from([1, 4, 8]),
    required=st.sampled_from([None, "block"]),
    chosen=st.sets(st.integers(0, 15), min_size=1),
    times=st.lists(st.sampled_from([0.0, 10.0, 50.0, NEVER]), min_size=16, max_size=16),
)
def test_the_fewest_nodes_to_hold_are_those_of_the_first_count_that_fits(
    pods: int, gpus: int, required: str | None, chosen: set[int], times: list[float]
) -> None:
    topology = {"required": required} if required else {}
    asked = workload(gpu_pods(pods, gpus=gpus, **topology))
    candidates = np.asarray(sorted(chosen), dtype=np.int64)
    free_at = np.asarray(times)
    expected = by_every_count(candidates, free_at, asked)
    for _ in range(2):  # worked out, then remembered
        found = nodes_to_hold(TREE, candidates, free_at, asked)
        assert (None if found is None else (found[0].tolist(), found[1])) == expected


def test_first_fitting_starts_at_its_lower_bound() -> None:
    asked: list[int] = []

    def fits(count: int) -> bool:
        asked.append(count)
        return count >= 7

    assert first_fitting(10, fits, least=5) == 7
    assert min(asked) == 5  # below the bound nothing was asked
    assert first_fitting(10, lambda count: count >= 3, least=3) == 3
    assert first_fitting(4, lambda count: False, least=2) is None
