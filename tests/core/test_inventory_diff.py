"""The difference from the stored inventory to a new cluster file's: nodes added, removed and
changed, and the gangs that cannot stay where they run."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from topoq.core.inventory_diff import displacement, inventory_diff
from topoq.domain.job import Allocation, JobId, JobPhase, JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import job

GPU = NVIDIA_GPU


def node(name: str, gpus: int = 8, **labels: str) -> NodeSpec:
    return NodeSpec(NodeName(name), labels=labels, allocatable=Resources({GPU: gpus}))


def running(job_id: str, **gpus_on_node: int) -> JobView:
    held = {name: Resources({GPU: gpus}) for name, gpus in gpus_on_node.items()}
    allocation = Allocation(PlacementResult(job_id, ()), held, {})
    return replace(job(job_id, "nlp"), phase=JobPhase.RUNNING, allocation=allocation)


def test_the_same_inventory_is_no_difference() -> None:
    nodes = [node("a"), node("b")]
    diff = inventory_diff(nodes, list(nodes), [running("j", a=8)])
    assert diff.empty and diff.displaced == ()
    assert list(diff.nodes) == nodes


def test_added_removed_and_changed_nodes_are_told_apart() -> None:
    stored = [node("a"), node("b"), node("c", block="b1")]
    wanted = [node("a", gpus=16), node("c", block="b2"), node("d")]
    diff = inventory_diff(stored, wanted, [])
    assert [n.name for n in diff.added] == ["d"]
    assert [r.node.name for r in diff.removed] == ["b"]
    assert {c.name: c.what for c in diff.changed} == {"a": ("allocatable",), "c": ("labels",)}
    assert [n.name for n in diff.nodes] == ["a", "c", "d"]


def test_a_gang_on_a_removed_node_is_displaced() -> None:
    diff = inventory_diff(
        [node("a"), node("b")], [node("a")], [running("j", b=8), running("k", a=8)]
    )
    assert diff.removed[0].gangs == (JobId("j"),)
    assert diff.displaced == (JobId("j"),)


def test_a_node_shrunk_below_what_its_gangs_hold_displaces_them() -> None:
    diff = inventory_diff([node("a")], [node("a", gpus=4)], [running("j", a=8)])
    [change] = diff.changed
    assert change.shrinks == (GPU,) and change.short_of == (GPU,)
    assert diff.displaced == (JobId("j"),)


def test_a_node_that_shrinks_but_still_holds_its_gangs_displaces_none() -> None:
    diff = inventory_diff([node("a")], [node("a", gpus=4)], [running("j", a=2)])
    [change] = diff.changed
    assert change.shrinks == (GPU,) and change.short_of == ()
    assert change.gangs == (JobId("j"),) and diff.displaced == ()


def test_a_gang_on_a_relabelled_node_keeps_running() -> None:
    diff = inventory_diff([node("a", block="b1")], [node("a", block="b2")], [running("j", a=8)])
    assert diff.changed[0].gangs == (JobId("j"),)
    assert diff.displaced == ()


def test_a_stored_cordon_and_failure_stand_and_are_no_change() -> None:
    stored = [replace(node("a"), unschedulable=True), replace(node("b"), ready=False)]
    diff = inventory_diff(stored, [node("a"), node("b"), replace(node("c"), ready=False)], [])
    assert [n.name for n in diff.added] == ["c"] and diff.changed == ()
    assert [(n.unschedulable, n.ready) for n in diff.nodes] == [
        (True, True),
        (False, False),
        (False, False),
    ]


_NAMES = st.sampled_from([NodeName(f"n{i}") for i in range(8)])
_NODES = st.lists(
    st.builds(
        lambda name, gpus, block: node(name, gpus, block=block),
        _NAMES,
        st.integers(0, 16),
        st.sampled_from(["b1", "b2"]),
    ),
    unique_by=lambda n: n.name,
    max_size=8,
)


@given(stored=_NODES, wanted=_NODES)
def test_applying_the_difference_to_the_stored_inventory_gives_the_new_one(
    stored: list[NodeSpec], wanted: list[NodeSpec]
) -> None:
    diff = inventory_diff(stored, wanted, [])
    assert diff.applied_to(stored) == wanted == list(diff.nodes)
    names = {n.name for n in stored} | {n.name for n in wanted}
    touched = [n.name for n in diff.added] + [r.node.name for r in diff.removed]
    touched += [c.name for c in diff.changed]
    assert len(touched) == len(set(touched)) and set(touched) <= names


def test_the_refusal_names_the_nodes_and_the_gangs() -> None:
    stored = [node("a"), node("b")]
    diff = inventory_diff(stored, [node("a", gpus=4)], [running("j", b=8), running("k", a=8)])
    message = displacement(diff)
    assert message is not None
    assert "removes node b (j run there)" in message
    assert "shrinks node a below what k hold of nvidia.com/gpu" in message
    assert displacement(inventory_diff(stored, stored, [running("j", b=8)])) is None
