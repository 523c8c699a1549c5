"""Placement's shortcuts give the full answers: the pods that fit per node, kept on a ledger
across charges and copies, are those worked out anew from its free capacity, and a placed pod
set's span is the count of distinct domains of its assignments."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.eligibility import eligibility_of
from topoq.core.holdings import resources_taken
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.placement.fit import _fits_per_row, pods_per_leaf
from topoq.core.placement.request import demand_of
from topoq.core.tree import build_tree
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.workload import WorkloadSpec
from topoq.testing.builders import BLOCK, cluster, gpu_pods

from .test_placement_properties import scenarios

TREE = build_tree(*cluster([2, 3, 4]))
SHAPES = [gpu_pods(1, gpus=gpus, name="ps") for gpus in (1, 2, 4, 8)]

Step = tuple[str, int, int, int]
"""(what, which live ledger, node, amount): charge a node, copy, forget, or ask a shape."""


def steps() -> st.SearchStrategy[list[Step]]:
    step = st.tuples(
        st.sampled_from(["charge", "charge", "copy", "without", "forget", "ask", "ask"]),
        st.integers(0, 7),
        st.integers(0, len(TREE.nodes) - 1),
        st.integers(0, 8),
    )
    return st.lists(step, max_size=40)


def fresh_fits(ledger: CapacityLedger, shape: int) -> np.ndarray:
    demand = demand_of(ledger.tree, SHAPES[shape].requests)
    return _fits_per_row(ledger.free.copy(), demand.columns, demand.vector[demand.columns])


@settings(max_examples=300, deadline=None)
@given(steps(), st.lists(st.integers(0, 8), min_size=len(TREE.nodes), max_size=len(TREE.nodes)))
def test_the_pods_that_fit_kept_on_ledgers_are_those_worked_out_anew(
    run: list[Step], used_gpus: list[int]
) -> None:
    """Any run of charges, copies (``scratch``, ``without``), forgotten ledgers and questions,
    on any of the ledgers still alive: the kept figure equals the one from ``free``."""
    used = np.zeros_like(TREE.capacity)
    used[:, TREE.resource_column[NVIDIA_GPU]] = used_gpus
    alive = [CapacityLedger.with_used(TREE, used)]
    gpu = TREE.resource_column[NVIDIA_GPU]
    for what, which, node, amount in run:
        ledger = alive[which % len(alive)]
        if what == "charge":
            taken = np.zeros(TREE.capacity.shape[1], dtype=np.int64)
            taken[gpu] = min(amount, int(ledger.free[node, gpu]))
            if node % 2:
                ledger.charge_node(node, taken)
            else:
                ledger.charge_nodes(np.asarray([node]), taken[None, :])
        elif what == "copy":
            alive.append(ledger.scratch())
        elif what == "without":
            alive.append(ledger.without(np.asarray([node, (node + amount) % len(TREE.nodes)])))
        elif what == "forget" and len(alive) > 1:
            alive.remove(ledger)
        elif what == "ask":
            pod_set = SHAPES[amount % len(SHAPES)]
            kept = pods_per_leaf(
                ledger, demand_of(TREE, pod_set.requests), eligibility_of(TREE, pod_set)
            )
            assert (kept == fresh_fits(ledger, amount % len(SHAPES))).all()
    for ledger in alive:
        for shape, pod_set in enumerate(SHAPES):
            kept = pods_per_leaf(
                ledger, demand_of(TREE, pod_set.requests), eligibility_of(TREE, pod_set)
            )
            assert (kept == fresh_fits(ledger, shape)).all()


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_what_a_placement_took_read_off_its_nodes_is_the_whole_ledgers_difference(
    scenario: tuple,  # type: ignore[type-arg]
) -> None:
    """``resources_taken`` told the placement compares only the nodes it put pods on, and
    finds what comparing every node finds, in the same (node) order."""
    nodes, spec, used, work = scenario
    tree = build_tree(nodes, spec)
    before = CapacityLedger.with_usage(tree, used)
    result, after = place_workload(before, work)
    whole = resources_taken(before, after)
    read_off = resources_taken(before, after, result)
    assert list(read_off.items()) == list(whole.items())
    assert bool(whole) == result.admitted


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_the_span_counts_the_distinct_domains_of_the_assignments(scenario: tuple) -> None:  # type: ignore[type-arg]
    nodes, spec, used, work = scenario
    tree = build_tree(nodes, spec)
    result, _ = place_workload(CapacityLedger.with_usage(tree, used), work)
    for outcome in result.pod_sets:
        for depth, label in enumerate(spec.levels):
            paths = {
                tuple(a.domain[name] for name in spec.levels[: depth + 1])
                for a in outcome.assignments
            }
            assert outcome.span.get(label, 0) == len(paths)


def test_a_placement_on_a_ledger_with_kept_figures_is_the_one_on_a_new_ledger() -> None:
    """Job after job on what the one before left (the kept figures updated by each charge)
    places every job where it goes on a ledger built from the same free capacity."""
    ledger = CapacityLedger.empty_cluster(TREE)
    refused = 0
    for index, gpus in enumerate([8, 2, 4, 1, 8, 8, 2, 4, 8, 1, 8] * 2):
        work = WorkloadSpec(f"j{index}", (gpu_pods(3, gpus=gpus, name="ps", preferred=BLOCK),))
        result, after = place_workload(ledger, work)
        again, _ = place_workload(CapacityLedger(TREE, ledger.free.copy()), work)
        assert result == again
        refused += not result.admitted
        ledger = after
    assert refused  # the cluster filled up: refusals were compared too
