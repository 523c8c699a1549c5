"""The per-cycle ledger prepared from the previous cycle's: the same figures as a ledger
rebuilt from every holder, and the same usage per team as summed from every holder, whatever
came, went or moved (or changed team), and the previous one unchanged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.holdings import ledger_after, prepared_ledger, usage_by_team
from topoq.core.tree import build_tree
from topoq.domain.job import Allocation, JobPhase, JobView
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.builders import cluster
from topoq.testing.governance import job

TREE = build_tree(*cluster([2, 2, 3]))
NAMES = [node.name for node in TREE.nodes] + ["gone"]  # a node that left the tree too

Holding = list[tuple[int, int]]
"""A holder's (node, GPUs) pairs."""
holdings = st.lists(st.tuples(st.integers(0, len(NAMES) - 1), st.integers(1, 12)), max_size=4)


def holder(name: str, on_nodes: Holding, team: str = "a") -> JobView:
    held = {NAMES[node]: Resources({NVIDIA_GPU: gpus}) for node, gpus in on_nodes}
    flavor = "p5" if len(on_nodes) % 2 else "g6"
    usage = {flavor: Resources({NVIDIA_GPU: sum(gpus for _, gpus in on_nodes)})}
    allocation = Allocation(PlacementResult(name, ()), held, usage)  # type: ignore[dict-item]
    return JobView(job(name, team).spec, phase=JobPhase.RUNNING, allocation=allocation)


teams = st.lists(st.sampled_from("ab"), min_size=6, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(holdings, max_size=6),
    st.lists(holdings, max_size=6),
    st.booleans(),
    teams,
    teams,
)
def test_a_ledger_prepared_from_the_previous_is_the_ledger_rebuilt(
    before: list[Holding],
    after: list[Holding],
    keep_first: bool,
    teams_before: list[str],
    teams_after: list[str],
) -> None:
    then = [holder(f"j{i}", nodes, teams_before[i]) for i, nodes in enumerate(before)]
    now = [holder(f"j{i}", nodes, teams_after[i]) for i, nodes in enumerate(after)]
    if keep_first and then:
        now = [then[0], *now[1:]]  # one holder unchanged, the same allocation
    previous = prepared_ledger(TREE, then)
    kept = previous.ledger().free.copy()
    derived = prepared_ledger(TREE, now, previous).ledger()
    rebuilt = ledger_after(TREE, now)
    assert (derived.free == rebuilt.free).all()
    for mine, theirs in zip(derived.domain_free, rebuilt.domain_free, strict=True):
        assert (mine == theirs).all()
    assert (previous.ledger().free == kept).all()  # the previous cycle's is left as it was
    assert (previous.ledger().free == ledger_after(TREE, then).free).all()
    assert prepared_ledger(TREE, now, previous).usage_by_team() == usage_by_team(now)
    assert previous.usage_by_team() == usage_by_team(then)


def test_a_prepared_ledger_hands_out_copies_to_charge() -> None:
    prepared = prepared_ledger(TREE, [holder("j", [(0, 8)])])
    mine = prepared.ledger()
    mine.charge_node(1, mine.free[1])
    assert prepared.ledger().free[1].any()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(holdings, max_size=5), min_size=3, max_size=3),
    st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=3, max_size=3),
)
def test_ledgers_derived_cycle_after_cycle_name_what_came_and_match_the_rebuilt(
    generations: list[list[Holding]], reuse: list[list[bool]]
) -> None:
    """Cycle after cycle, with some holders the very same views as the cycle before (most
    are, in a shell): each ledger is the one rebuilt from every holder, and ``came`` names
    the holders whose holdings are new or moved, in the holders' order."""
    previous = None
    views: list[JobView] = []
    for holdings_now, kept in zip(generations, reuse, strict=True):
        made = [holder(f"j{i}", nodes) for i, nodes in enumerate(holdings_now)]
        now = [views[i] if i < len(views) and kept[i] else view for i, view in enumerate(made)]
        prepared = prepared_ledger(TREE, now, previous)
        assert (prepared.ledger().free == ledger_after(TREE, now).free).all()
        assert prepared.usage_by_team() == usage_by_team(now)
        if previous is not None:
            before = {view.id: view.allocation for view in views}
            moved = [
                view.id
                for view in now
                if view.id not in before
                or before[view.id].resources_on_node != view.allocation.resources_on_node
                or before[view.id].usage != view.allocation.usage
            ]
            assert list(prepared.came or ()) == moved
        previous, views = prepared, now
