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


def _row_sums(free: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """A per-node figure of each row alone (and the node's index, as figures may use it)."""
    nodes = np.arange(len(free)) if rows is None else rows
    return np.asarray(free.sum(axis=1) * 100 + nodes, dtype=np.int64)


Step = tuple[str, int, int]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["charge", "ask", "copy", "other"]), st.integers(0, 11), st.integers(0, 3)
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_a_kept_per_node_figure_is_always_the_figure_of_the_free_capacity_now(
    steps: list[Step],
) -> None:
    """Whatever charges came between (on the ledger, on copies of it, many or few: past the
    point where the list of charges gives way to each node's last charge), a figure kept
    across them is what working it out anew on the free capacity gives."""
    ledger = CapacityLedger.empty_cluster(TREE)
    ledgers = [ledger]
    for action, node, amount in steps:
        current = ledgers[-1]
        if action == "charge":
            taken = np.zeros(current.free.shape[1], dtype=np.int64)
            taken[0] = min(amount, int(current.free[node, 0]))
            current.charge_nodes(np.asarray([node]), taken[None, :])
        elif action == "copy":
            ledgers.append(current.scratch())
        elif action == "other":
            current.per_node(("other", amount), _row_sums)  # more figures kept beside it
        checked = ledgers[node % len(ledgers)] if action == "ask" else current
        kept = checked.per_node("sums", _row_sums)
        assert (kept == _row_sums(checked.free, None)).all()
