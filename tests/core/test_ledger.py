"""The ledger's derived copies: without the capacity held on some nodes, the same figures as
a ledger built from the reduced free capacity, the original untouched."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.ledger import CapacityLedger
from topoq.core.tree import build_tree
from topoq.testing.builders import cluster

TREE = build_tree(*cluster([2, 2, 3]))
FLAT_TREE = build_tree(*cluster([2, 2, 3], hostname_level=False))


def same_figures(left: CapacityLedger, right: CapacityLedger) -> bool:
    return (left.free == right.free).all() and all(
        (mine == theirs).all()
        for mine, theirs in zip(left.domain_free, right.domain_free, strict=True)
    )


@settings(max_examples=100, deadline=None)
@given(
    st.booleans(),
    st.lists(st.integers(0, 11), max_size=12),
    st.integers(0, 8),
    st.booleans(),
)
def test_a_ledger_without_some_nodes_is_the_ledger_of_what_is_left(
    hosts: bool, nodes: list[int], gpus: int, whole: bool
) -> None:
    tree = TREE if hosts else FLAT_TREE
    used = np.zeros_like(tree.capacity)
    used[:, 0] = np.arange(len(tree.nodes)) % 3
    ledger = CapacityLedger.with_used(tree, used)
    before = ledger.free.copy()
    indices = np.asarray(nodes, dtype=np.int64)
    amounts = np.zeros((len(nodes), tree.capacity.shape[1]), dtype=np.int64)
    amounts[:, 0] = gpus
    derived = ledger.without(indices, None if whole else amounts)
    free = ledger.free.copy()
    if whole:
        free[indices] = 0
    else:
        for index, amount in zip(indices, amounts, strict=True):
            free[index] = np.maximum(free[index] - amount, 0)
    assert same_figures(derived, CapacityLedger(tree, free))
    assert (ledger.free == before).all()  # the original keeps its capacity
