"""What ``--write-topology`` would write, and what it refuses to write, decided without Slurm
(the real cluster's side is in tests/slurm/test_write_topology.py)."""

from __future__ import annotations

from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.executors.slurm.topology_conf import (
    ROOT_SWITCH,
    leaf_switches,
    problems_with,
    wanted_topology_conf,
)

SPINE = "topology.k8s.aws/network-node-layer-1"
BLOCK = "topology.k8s.aws/network-node-layer-2"
LEVELS = TopologySpec("hyperpod", (SPINE, BLOCK, HOSTNAME_LABEL))


def node(name: str, spine: str, block: str, *, ready: bool = True) -> NodeSpec:
    return NodeSpec(
        NodeName(name),
        labels={SPINE: spine, BLOCK: block, HOSTNAME_LABEL: name},
        ready=ready,
        unschedulable=not ready,
    )


NODES = [
    node("n00", "s1", "b1"),
    node("n01", "s1", "b1"),
    node("n02", "s1", "b2", ready=False),  # drained or down: stays in the tree
    node("n03", "s1", "b2"),
    node("n04", "s2", "b3"),
    node("n05", "s2", "b3"),
]
ALL = frozenset(n.name for n in NODES)


def groups(text: str) -> dict[str, set[str]]:
    return {switch: set(nodes) for switch, nodes in leaf_switches(text).items()}


def test_every_node_is_written_whatever_its_state_and_the_spines_are_joined_by_a_root() -> None:
    text = wanted_topology_conf((NODES, LEVELS))
    assert groups(text) == {"b1": {"n00", "n01"}, "b2": {"n02", "n03"}, "b3": {"n04", "n05"}}
    assert f"SwitchName={ROOT_SWITCH} Switches=s[1-2]" in text
    nodes, levels = cluster_from_slurm(parse_topology_conf(text), node_resources=Resources())
    assert {n.labels[levels.levels[0]] for n in nodes} == {ROOT_SWITCH}
    assert problems_with(text, ALL) == []


def test_one_spine_needs_no_root() -> None:
    text = wanted_topology_conf((NODES[:4], LEVELS))
    assert ROOT_SWITCH not in text
    assert problems_with(text, frozenset(n.name for n in NODES[:4])) == []


def test_a_slurm_node_missing_from_topoqs_view_refuses_the_file() -> None:
    text = wanted_topology_conf((NODES[:5], LEVELS))
    (problem,) = problems_with(text, ALL)
    assert "missing from topoq's topology: n05" in problem


def test_a_node_slurm_does_not_know_refuses_the_file() -> None:
    text = wanted_topology_conf((NODES, LEVELS))
    (problem,) = problems_with(text, ALL - {"n04"})
    assert "Slurm does not know: n04" in problem


def test_switches_with_no_common_ancestor_refuse_the_file() -> None:
    text = "SwitchName=a Nodes=n[00-02]\nSwitchName=b Nodes=n[03-05]\n"
    assert problems_with(text, ALL) == ["no switch reaches every node"]


def test_a_file_slurm_would_not_parse_is_refused_with_the_parsers_reason() -> None:
    (problem,) = problems_with("SwitchName=a Nodes=n[00-05\n", ALL)
    assert "n[00-05" in problem


def test_scontrol_show_topology_reads_as_the_file_does() -> None:
    shown = (
        "SwitchName=b1 Level=0 LinkSpeed=1 Nodes=n[00-01]\n"
        "SwitchName=s1 Level=1 LinkSpeed=1 Nodes=n[00-01] Switches=b1\n"
    )
    assert leaf_switches(shown) == {"b1": frozenset({"n00", "n01"})}
