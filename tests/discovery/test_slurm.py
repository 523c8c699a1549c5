"""Slurm topology.conf: parsing, validation, import into topoq nodes, export, round trips."""

from __future__ import annotations

import contextlib
import gc
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.discovery.slurm import (
    SLURM_BLOCK_LABEL,
    SlurmBlock,
    SlurmSwitch,
    SlurmTopology,
    cluster_from_slurm,
    parse_topology_conf,
    slurm_block_group_label,
    slurm_switch_label,
)
from topoq.discovery.slurm_export import SINGLE_DOMAIN_NAME, render_topology_conf
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU, PODS
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm"
P5 = Resources({NVIDIA_GPU: 8, PODS: 110})

FORMATS_TREE = """\
# tree plugin
SwitchName=leaf1 Nodes=p5-[001-016]
SwitchName=leaf2 Nodes=p5-[017-032]
SwitchName=spine1 Switches=leaf[1-2]
"""
FORMATS_BLOCK = """\
# block plugin (Slurm 23.11+; a cluster uses the tree or the block plugin)
BlockName=nvl1 Nodes=gb-[01-18]
BlockName=nvl2 Nodes=gb-[19-36]
BlockSizes=18,36
"""
SPINE, LEAF = slurm_switch_label(1), slurm_switch_label(2)


def _p5(first: int, last: int) -> tuple[str, ...]:
    return tuple(f"p5-{number:03d}" for number in range(first, last + 1))


# --- parsing ---------------------------------------------------------------------------------


def test_parse_formats_tree_example() -> None:
    topology = parse_topology_conf(FORMATS_TREE)
    assert topology == SlurmTopology(
        plugin="tree",
        switches=(
            SlurmSwitch("leaf1", nodes=_p5(1, 16)),
            SlurmSwitch("leaf2", nodes=_p5(17, 32)),
            SlurmSwitch("spine1", switches=("leaf1", "leaf2")),
        ),
    )
    assert [switch.line for switch in topology.switches] == [2, 3, 4]
    assert [root.name for root in topology.roots] == ["spine1"]
    assert topology.depth == 2


def test_parse_formats_block_example() -> None:
    topology = parse_topology_conf(FORMATS_BLOCK)
    gb = tuple(f"gb-{number:02d}" for number in range(1, 37))
    assert topology == SlurmTopology(
        plugin="block",
        blocks=(SlurmBlock("nvl1", gb[:18]), SlurmBlock("nvl2", gb[18:])),
        block_sizes=(18, 36),
    )
    assert topology.base_block_size == 18
    assert topology.block_group_spans == (2,)


def test_parse_accepts_any_key_case_comments_blank_lines_and_link_speed() -> None:
    text = "\n  # header\n\nswitchname=s1 NODES=n[1-2]   linkspeed=400 # trailing\n\n"
    topology = parse_topology_conf(text)
    assert topology.switches == (SlurmSwitch("s1", nodes=("n1", "n2"), link_speed=400),)
    assert topology.switches[0].line == 4


def test_parse_accepts_several_root_switches() -> None:
    text = """\
SwitchName=a1 Nodes=n[1-2]
SwitchName=b1 Nodes=n[3-4]
SwitchName=rootA Switches=a1
SwitchName=rootB Switches=b1
"""
    topology = parse_topology_conf(text)
    assert [root.name for root in topology.roots] == ["rootA", "rootB"]
    assert topology.switch_path("b1") == ("rootB", "b1")


def test_parse_accepts_blocks_larger_than_the_base_block() -> None:
    text = "BlockName=b1 Nodes=n[1-18]\nBlockName=b2 Nodes=n[19-34]\nBlockSizes=16,32\n"
    topology = parse_topology_conf(text)
    assert [len(block.nodes) for block in topology.blocks] == [18, 16]


def test_parse_strips_double_quotes_around_a_value() -> None:
    topology = parse_topology_conf('SwitchName="s1" Nodes="n[1-2]"')
    assert topology.switches == (SlurmSwitch("s1", nodes=("n1", "n2")),)


def test_parse_example_files() -> None:
    tree = parse_topology_conf((EXAMPLES / "topology-tree.conf").read_text())
    assert tree.depth == 3
    assert sum(len(switch.nodes) for switch in tree.switches) == 64
    block = parse_topology_conf((EXAMPLES / "topology-block.conf").read_text())
    assert [len(b.nodes) for b in block.blocks] == [18, 18, 18, 18]
    assert block.block_group_spans == (2, 4)


def test_parse_broken_example_names_the_node_both_leaves_and_both_lines() -> None:
    path = EXAMPLES / "topology-broken.conf"
    with pytest.raises(TopologyError) as caught:
        parse_topology_conf(path.read_text(), source=path.name)
    error = caught.value
    assert error.where == "topology-broken.conf:7"
    assert "p5-017" in error.message
    assert "leaf1 (line 6)" in error.message
    assert "leaf2 (line 7)" in error.message


# --- validation: every case names the line and says what to fix -----------------------------

TREE_ERRORS = [
    pytest.param(
        "SwitchName=leaf1 Nodes=p5-[001-016]\nSwitchName=leaf2 Nodes=p5-[016-032]\n",
        2,
        ["p5-016", "leaf1 (line 1)", "leaf2 (line 2)"],
        id="node-in-two-leaves",
    ),
    pytest.param(
        "SwitchName=leaf1 Nodes=n1\nSwitchName=spine Switches=leaf1,leaf2\n",
        2,
        ["unknown switch 'leaf2'", "spine"],
        id="unknown-child-switch",
    ),
    pytest.param(
        "SwitchName=leaf1 Nodes=n1\nSwitchName=s1 Switches=leaf1\nSwitchName=s2 Switches=leaf1\n",
        3,
        ["leaf1", "s1 (line 2)", "s2 (line 3)"],
        id="switch-with-two-parents",
    ),
    pytest.param(
        "SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=c Nodes=n1\n",
        1,
        ["cycle", "a → b → a"],
        id="cycle-of-two",
    ),
    pytest.param(
        "SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n",
        1,
        ["cycle", "a → b → c → a"],
        id="cycle-of-three",
    ),
    pytest.param("SwitchName=a Switches=a\n", 1, ["cycle", "a → a"], id="switch-below-itself"),
    pytest.param("SwitchName=s1 LinkSpeed=10\n", 1, ["neither Nodes= nor Switches="], id="empty"),
    pytest.param(
        "SwitchName=leaf1 Nodes=n1\nSwitchName=s1 Switches=leaf1 Nodes=n2\n",
        2,
        ["both Nodes= and Switches="],
        id="nodes-and-switches",
    ),
    pytest.param(
        "SwitchName=leaf1 Nodes=n[1-2]\nSwitchName=spine Switches=leaf1\n"
        "SwitchName=leaf2 Nodes=n3\n",
        3,
        ["different depths", "leaf2 (line 3)", "leaf1 (line 1)", "spine > leaf1"],
        id="mixed-depths",
    ),
    pytest.param(
        "SwitchName=leaf1 Nodes=n1\nSwitchName=leaf1 Nodes=n2\n",
        2,
        ["leaf1", "line 1", "line 2"],
        id="duplicate-switch-name",
    ),
    pytest.param("SwitchNme=leaf1 Nodes=n1\n", 1, ["unknown key 'SwitchNme'"], id="typo-in-name"),
    pytest.param("SwitchName=leaf1 Nodez=n1\n", 1, ["unknown key 'Nodez'"], id="typo-in-key"),
    pytest.param(
        "SwitchName=leaf1 Nodes=n1\nBlockName=b1 Nodes=n2\n",
        2,
        ["BlockName= on line 2", "SwitchName= on line 1"],
        id="tree-and-block-mixed",
    ),
    pytest.param(
        "BlockSizes=1\nSwitchName=leaf1 Nodes=n1\n", 2, ["mixes plugins"], id="block-then-tree"
    ),
    pytest.param("SwitchName=leaf1 Nodes=n[5-3]\n", 1, ["Nodes=", "runs backwards"], id="range"),
    pytest.param("SwitchName=leaf1 Nodes=n[1-3\n", 1, ["Nodes=", "unbalanced"], id="bracket"),
    pytest.param("SwitchName=s Switches=l[]\n", 1, ["Switches=", "empty range"], id="empty-range"),
    pytest.param("SwitchName=leaf1 n1\n", 1, ["'n1' is not a Key=value pair"], id="no-equals"),
    pytest.param("SwitchName = leaf1 Nodes=n1\n", 1, ["not a Key=value pair"], id="spaces"),
    pytest.param("SwitchName=leaf1 Nodes=\n", 1, ["Nodes= has no value"], id="empty-value"),
    pytest.param("SwitchName=l Nodes=a Nodes=b\n", 1, ["Nodes= appears twice"], id="dup-key"),
    pytest.param("SwitchName=l Nodes=n1 LinkSpeed=fast\n", 1, ["LinkSpeed=fast"], id="speed"),
    pytest.param("SwitchName=l Nodes=n[1-2],n2\n", 1, ["lists 'n2' twice"], id="node-twice"),
    pytest.param("SwitchName=l[1-2] Nodes=n1\n", 1, ["is a hostlist"], id="bracket-name"),
    pytest.param(f"SwitchName={'s' * 65} Nodes=n1\n", 1, ["65 characters"], id="long-name"),
    pytest.param("Nodes=n1 SwitchName=l\n", 1, ["starts with Nodes="], id="name-not-first"),
    pytest.param("RingName=r0 Nodes=n[1-8]\n", 1, ["RingName= is not supported"], id="ring"),
]

BLOCK_ERRORS = [
    pytest.param(
        "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-7]\n",
        2,
        ["node n4", "b1 (line 1)", "b2 (line 2)"],
        id="node-in-two-blocks",
    ),
    pytest.param(
        "BlockName=b1 Nodes=n[1-2]\nBlockName=b1 Nodes=n[3-4]\n",
        2,
        ["block b1", "line 1", "line 2"],
        id="duplicate-block-name",
    ),
    pytest.param("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,2\n", 2, ["not ascending"], id="order"),
    pytest.param("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,4\n", 2, ["not ascending"], id="repeat"),
    pytest.param(
        "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,6\n", 2, ["not a multiple of"], id="multiple"
    ),
    pytest.param(
        "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", 2, ["not a power of two"], id="power"
    ),
    pytest.param("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x\n", 2, ["'x'"], id="not-a-number"),
    pytest.param("BlockName=b1 Nodes=n[1-4]\nBlockSizes=0\n", 2, ["'0'"], id="zero"),
    pytest.param("BlockName=b1 Nodes=n1\nBlockSizes=1\nBlockSizes=1\n", 3, ["again"], id="twice"),
    pytest.param(
        "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-7]\nBlockSizes=4\n",
        2,
        ["block b2 holds 3 nodes", "base block size 4", "line 3"],
        id="block-below-base",
    ),
    pytest.param(
        "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-7]\n",
        2,
        ["block b2 holds 3 nodes", "first block, b1"],
        id="block-below-first-block",
    ),
    pytest.param("BlockName=b1\n", 1, ["lists no Nodes="], id="no-nodes"),
    pytest.param("BlockSizes=18,36\n", 1, ["empty"], id="sizes-without-blocks"),
    pytest.param("BlockName=b1 Switches=s1\n", 1, ["does not belong on a BlockName="], id="key"),
]


@pytest.mark.parametrize(("text", "line", "fragments"), [*TREE_ERRORS, *BLOCK_ERRORS])
def test_parse_rejects_invalid_topology_naming_the_line(
    text: str, line: int, fragments: list[str]
) -> None:
    with pytest.raises(TopologyError) as caught:
        parse_topology_conf(text, source="gen/topology.conf")
    error = caught.value
    assert error.where == f"gen/topology.conf:{line}"
    for fragment in fragments:
        assert fragment in error.message
    assert error.hint


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   # another\n"])
def test_parse_rejects_empty_topology(text: str) -> None:
    with pytest.raises(TopologyError, match="empty") as caught:
        parse_topology_conf(text, source="t.conf")
    assert caught.value.where == "t.conf"


def test_block_below_the_first_block_suggests_block_sizes() -> None:
    with pytest.raises(TopologyError) as caught:
        parse_topology_conf("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-7]\n")
    assert caught.value.hint is not None
    assert "add BlockSizes=3" in caught.value.hint


def test_unknown_key_suggests_the_intended_key() -> None:
    with pytest.raises(TopologyError) as caught:
        parse_topology_conf("SwitchName=a Swiches=b")
    assert caught.value.hint is not None
    assert "did you mean Switches=?" in caught.value.hint


def test_unknown_child_switch_suggests_a_close_name() -> None:
    with pytest.raises(TopologyError) as caught:
        parse_topology_conf("SwitchName=leaf01 Nodes=n1\nSwitchName=s Switches=leaf1")
    assert caught.value.hint is not None
    assert "did you mean leaf01?" in caught.value.hint


def test_mixed_depths_across_separate_trees_is_an_error() -> None:
    text = "SwitchName=l1 Nodes=a\nSwitchName=r1 Switches=l1\nSwitchName=r2 Nodes=b\n"
    with pytest.raises(TopologyError, match="a root itself"):
        parse_topology_conf(text)


# --- import into topoq nodes ---------------------------------------------------------------


def test_cluster_from_tree_labels_each_node_with_its_switches() -> None:
    nodes, topology = cluster_from_slurm(parse_topology_conf(FORMATS_TREE), node_resources=P5)
    assert topology == TopologySpec("slurm-tree", (SPINE, LEAF, HOSTNAME_LABEL))
    assert [node.name for node in nodes] == list(_p5(1, 32))
    assert nodes[16] == NodeSpec(
        name=NodeName("p5-017"),
        labels={SPINE: "spine1", LEAF: "leaf2", HOSTNAME_LABEL: "p5-017"},
        allocatable=P5,
    )
    assert all(node.allocatable == P5 for node in nodes)


def test_cluster_from_tree_lists_nodes_depth_first_from_each_root() -> None:
    text = """\
SwitchName=b1 Nodes=n[5-6]
SwitchName=a2 Nodes=n[3-4]
SwitchName=a1 Nodes=n[1-2]
SwitchName=rootA Switches=a[1-2]
SwitchName=rootB Switches=b1
"""
    nodes, _ = cluster_from_slurm(parse_topology_conf(text), node_resources=P5)
    assert [node.name for node in nodes] == ["n1", "n2", "n3", "n4", "n5", "n6"]
    assert nodes[4].labels[SPINE] == "rootB"


def test_cluster_from_single_tier_tree_has_one_switch_level() -> None:
    nodes, topology = cluster_from_slurm(
        parse_topology_conf("SwitchName=s Nodes=n1"), node_resources=P5
    )
    assert topology.levels == (slurm_switch_label(1), HOSTNAME_LABEL)
    assert nodes[0].labels[slurm_switch_label(1)] == "s"


def test_cluster_from_blocks_labels_groups_largest_first() -> None:
    nodes, topology = cluster_from_slurm(
        parse_topology_conf((EXAMPLES / "topology-block.conf").read_text()), node_resources=P5
    )
    group36, group72 = slurm_block_group_label(36), slurm_block_group_label(72)
    assert topology == TopologySpec(
        "slurm-block", (group72, group36, SLURM_BLOCK_LABEL, HOSTNAME_LABEL)
    )
    by_name = {node.name: node.labels for node in nodes}
    assert by_name[NodeName("gb200-001")] == {
        group72: "group-72-1",
        group36: "group-36-1",
        SLURM_BLOCK_LABEL: "nvl1",
        HOSTNAME_LABEL: "gb200-001",
    }
    assert by_name[NodeName("gb200-040")][group36] == "group-36-2"
    assert by_name[NodeName("gb200-040")][SLURM_BLOCK_LABEL] == "nvl3"


@pytest.mark.parametrize(
    ("sizes", "levels", "last_block_groups"),
    [
        ("", [], {}),
        ("BlockSizes=2", [], {}),
        ("BlockSizes=2,4", [4], {4: "group-4-2"}),
        ("BlockSizes=2,4,8", [8, 4], {8: "group-8-1", 4: "group-4-2"}),
        ("BlockSizes=2,8", [8], {8: "group-8-1"}),
        ("BlockSizes=2,4,8,16,32", [8, 4], {8: "group-8-1", 4: "group-4-2"}),
    ],
)
def test_cluster_from_three_blocks_keeps_partial_groups_and_drops_sizes_past_all_blocks(
    sizes: str, levels: list[int], last_block_groups: dict[int, str]
) -> None:
    text = (
        f"BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockName=b3 Nodes=n[5-6]\n{sizes}"
    )
    nodes, topology = cluster_from_slurm(parse_topology_conf(text), node_resources=P5)
    expected = [slurm_block_group_label(size) for size in levels]
    assert topology.levels == (*expected, SLURM_BLOCK_LABEL, HOSTNAME_LABEL)
    last = nodes[-1].labels
    assert {size: last[slurm_block_group_label(size)] for size in levels} == last_block_groups
    assert last[SLURM_BLOCK_LABEL] == "b3"


# --- export --------------------------------------------------------------------------------


def _node(
    name: str, labels: dict[str, str], *, ready: bool = True, unschedulable: bool = False
) -> NodeSpec:
    return NodeSpec(
        name=NodeName(name), labels=labels, allocatable=P5, ready=ready, unschedulable=unschedulable
    )


def _body(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line and not line.startswith("#")]


def test_render_tree_from_formats_example() -> None:
    nodes, topology = cluster_from_slurm(parse_topology_conf(FORMATS_TREE), node_resources=P5)
    conf = render_topology_conf(nodes, topology)
    assert conf.startswith("# Generated by topoq")
    assert _body(conf) == [
        "SwitchName=spine1 Switches=leaf[1-2]",
        "SwitchName=leaf1 Nodes=p5-[001-016]",
        "SwitchName=leaf2 Nodes=p5-[017-032]",
    ]


def test_render_topology_with_only_hostnames_adds_one_switch_or_block() -> None:
    nodes = [_node(f"n{i}", {}) for i in range(1, 4)]
    topology = TopologySpec("flat", (HOSTNAME_LABEL,))
    assert _body(render_topology_conf(nodes, topology)) == [
        f"SwitchName={SINGLE_DOMAIN_NAME} Nodes=n[1-3]"
    ]
    block_conf = render_topology_conf(nodes, topology, plugin="block")
    assert _body(block_conf) == [f"BlockName={SINGLE_DOMAIN_NAME} Nodes=n[1-3]"]


def test_render_makes_switch_names_unique_when_a_value_repeats_under_other_parents() -> None:
    zone, rack = "example.com/zone", "example.com/rack"
    nodes = [
        _node("n1", {zone: "a", rack: "r1"}),
        _node("n2", {zone: "b", rack: "r1"}),
        _node("n3", {zone: "b", rack: "r1-2"}),
        _node("n4", {zone: "c", rack: "a"}),
    ]
    conf = render_topology_conf(nodes, TopologySpec("racks", (zone, rack, HOSTNAME_LABEL)))
    assert _body(conf) == [
        "SwitchName=a Switches=r1",
        "SwitchName=b Switches=r1-[2-3]",
        "SwitchName=c Switches=a-2",
        "SwitchName=r1 Nodes=n1",
        "SwitchName=r1-3 Nodes=n2",
        "SwitchName=r1-2 Nodes=n3",
        "SwitchName=a-2 Nodes=n4",
    ]
    reparsed, _ = cluster_from_slurm(parse_topology_conf(conf), node_resources=P5)
    assert {node.name: node.labels[slurm_switch_label(2)] for node in reparsed} == {
        "n1": "r1",
        "n2": "r1-3",
        "n3": "r1-2",
        "n4": "a-2",
    }


def test_render_replaces_characters_slurm_cannot_read_in_switch_names() -> None:
    nodes = [_node("n1", {"zone": "us east#1"})]
    conf = render_topology_conf(nodes, TopologySpec("z", ("zone", HOSTNAME_LABEL)))
    assert _body(conf) == ["SwitchName=us_east_1 Nodes=n1"]


def test_render_leaves_out_unready_cordoned_and_unlabelled_nodes_with_a_comment() -> None:
    layer = "topology.k8s.aws/network-node-layer-1"
    nodes = [
        _node("ip-1", {layer: "nn-1", HOSTNAME_LABEL: "h1"}),
        _node("ip-2", {layer: "nn-1", HOSTNAME_LABEL: "h2"}, ready=False),
        _node("ip-3", {layer: "nn-1", HOSTNAME_LABEL: "h3"}, unschedulable=True),
        _node("ip-4", {HOSTNAME_LABEL: "h4"}),
        _node("ip-5", {layer: " "}),
    ]
    conf = render_topology_conf(nodes, TopologySpec("aws", (layer, HOSTNAME_LABEL)))
    assert "# Left out (not Ready or cordoned): h[2-3]" in conf.splitlines()
    assert f"# Left out (no {layer} label): h4,ip-5" in conf.splitlines()
    assert _body(conf) == ["SwitchName=nn-1 Nodes=h1"]


def test_render_refuses_when_no_node_can_be_written() -> None:
    nodes = [_node("n1", {}, ready=False)]
    with pytest.raises(TopologyError, match="no node can be written") as caught:
        render_topology_conf(nodes, TopologySpec("t", (HOSTNAME_LABEL,)))
    assert caught.value.where == "topology 't'"


def test_render_refuses_two_nodes_with_one_hostname() -> None:
    nodes = [_node("a", {HOSTNAME_LABEL: "h1"}), _node("b", {HOSTNAME_LABEL: "h1"})]
    with pytest.raises(TopologyError, match="'h1'") as caught:
        render_topology_conf(nodes, TopologySpec("t", (HOSTNAME_LABEL,)))
    assert caught.value.where == "node b"


def test_render_refuses_a_hostname_slurm_cannot_read() -> None:
    nodes = [_node("a", {HOSTNAME_LABEL: "h=1"})]
    with pytest.raises(InvalidInputError, match="cannot be written") as caught:
        render_topology_conf(nodes, TopologySpec("t", (HOSTNAME_LABEL,)))
    assert caught.value.where == "node a"


def test_render_blocks_of_equal_size_without_groups_keeps_slurm_default_sizes() -> None:
    block = "example.com/block"
    nodes = [_node(f"n{i}", {block: f"b{(i - 1) // 2}"}) for i in range(1, 7)]
    conf = render_topology_conf(nodes, TopologySpec("b", (block, HOSTNAME_LABEL)), plugin="block")
    assert _body(conf) == [
        "BlockName=b0 Nodes=n[1-2]",
        "BlockName=b1 Nodes=n[3-4]",
        "BlockName=b2 Nodes=n[5-6]",
    ]


def test_render_blocks_of_unequal_size_start_block_sizes_at_the_smallest() -> None:
    block = "example.com/block"
    nodes = [_node(f"n{i}", {block: "big" if i <= 3 else "small"}) for i in range(1, 6)]
    conf = render_topology_conf(nodes, TopologySpec("b", (block, HOSTNAME_LABEL)), plugin="block")
    assert _body(conf)[-1] == "BlockSizes=2"
    assert "# Blocks hold 2 to 3 nodes" in conf
    assert parse_topology_conf(conf).base_block_size == 2


def test_render_blocks_writes_higher_levels_as_block_sizes_when_slurm_can_express_them() -> None:
    pair, block, odd = "example.com/pair", "example.com/block", "example.com/odd"
    nodes = [  # blocks of 2 nodes, pairs of 2 blocks; odd holds 1 pair, then 2 pairs
        _node(
            f"n{i}",
            {odd: "x" if i <= 4 else "y", pair: f"p{(i - 1) // 4}", block: f"b{(i - 1) // 2}"},
        )
        for i in range(1, 13)
    ]
    topology = TopologySpec("b", (odd, pair, block, HOSTNAME_LABEL))
    conf = render_topology_conf(nodes, topology, plugin="block")
    assert _body(conf)[-1] == "BlockSizes=2,4"
    assert f"# Level {odd} is not written" in conf
    assert parse_topology_conf(conf).block_group_spans == (2,)


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "plugin"),
    [
        (FORMATS_TREE, "tree"),
        (FORMATS_BLOCK, "block"),
        ((EXAMPLES / "topology-tree.conf").read_text(), "tree"),
        ((EXAMPLES / "topology-block.conf").read_text(), "block"),
        ("BlockName=a Nodes=n[1-3]\nBlockName=b Nodes=n[4-5]\nBlockSizes=2,4,8,16\n", "block"),
        ("BlockName=a Nodes=n[1-3]\nBlockName=b Nodes=n[4-6]\nBlockSizes=3\n", "block"),
    ],
)
def test_parse_import_render_parse_gives_the_same_structure(text: str, plugin: str) -> None:
    original = parse_topology_conf(text)
    nodes, topology = cluster_from_slurm(original, node_resources=P5)
    rendered = render_topology_conf(nodes, topology, plugin="tree" if plugin == "tree" else "block")
    assert parse_topology_conf(rendered).same_structure(original)


def test_same_structure_ignores_line_order_and_link_speed_but_not_membership() -> None:
    first = parse_topology_conf("SwitchName=s Switches=l\nSwitchName=l Nodes=n[1-2] LinkSpeed=9")
    assert first.same_structure(
        parse_topology_conf("SwitchName=l Nodes=n2,n1\nSwitchName=s Switches=l")
    )
    assert not first.same_structure(
        parse_topology_conf("SwitchName=s Switches=l\nSwitchName=l Nodes=n1")
    )


@st.composite
def slurm_trees(draw: st.DrawFn) -> str:
    """A valid tree-plugin topology.conf: equal-depth trees, lines in any order."""
    depth = draw(st.integers(min_value=1, max_value=4))
    lines: list[str] = []
    counter = {"switch": 0, "node": 0}

    def grow(tier: int) -> str:
        counter["switch"] += 1
        name = f"sw{counter['switch']}"
        if tier == depth:
            first = counter["node"] + 1
            counter["node"] += draw(st.integers(min_value=1, max_value=5))
            lines.append(f"SwitchName={name} Nodes=n[{first:03d}-{counter['node']:03d}]")
        else:
            children = [grow(tier + 1) for _ in range(draw(st.integers(min_value=1, max_value=3)))]
            lines.append(f"SwitchName={name} Switches={','.join(children)}")
        return name

    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        grow(1)
    return "\n".join(draw(st.permutations(lines)))


@settings(max_examples=60)
@given(slurm_trees())
def test_generated_trees_survive_import_and_export(text: str) -> None:
    original = parse_topology_conf(text)
    nodes, topology = cluster_from_slurm(original, node_resources=P5)
    assert len(topology.levels) == original.depth + 1
    assert parse_topology_conf(render_topology_conf(nodes, topology)).same_structure(original)


@st.composite
def slurm_block_files(draw: st.DrawFn) -> str:
    base = draw(st.integers(min_value=1, max_value=3))
    more = draw(st.lists(st.integers(min_value=base, max_value=base + 2), max_size=8))
    counts = [base, *more]  # without BlockSizes the first block sets the base size
    spans = draw(st.lists(st.sampled_from([2, 4, 8, 16]), unique=True, max_size=3))
    lines, first = [], 1
    for index, count in enumerate(counts):
        lines.append(f"BlockName=blk{index} Nodes=g[{first}-{first + count - 1}]")
        first += count
    if draw(st.booleans()):
        lines.append("BlockSizes=" + ",".join(str(base * span) for span in [1, *sorted(spans)]))
    return "\n".join(lines)


@settings(max_examples=60)
@given(slurm_block_files())
def test_generated_block_files_survive_import_and_export(text: str) -> None:
    original = parse_topology_conf(text)
    nodes, topology = cluster_from_slurm(original, node_resources=P5)
    rendered = render_topology_conf(nodes, topology, plugin="block")
    assert parse_topology_conf(rendered).same_structure(original)


_LEVELS = ("example.com/zone", "example.com/rack")


@st.composite
def labelled_clusters(draw: st.DrawFn) -> list[NodeSpec]:
    """Nodes whose label values repeat freely across parents, some unready or unlabelled."""
    count = draw(st.integers(min_value=1, max_value=25))
    nodes = []
    for index in range(count):
        labels = {level: draw(st.sampled_from(["a", "b", "r1", "a-2"])) for level in _LEVELS}
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            labels.pop(_LEVELS[1])
        nodes.append(_node(f"node{index:02d}", labels, ready=draw(st.integers(0, 9)) > 0))
    return nodes


def _partition(nodes: list[NodeSpec], levels: tuple[str, ...]) -> frozenset[frozenset[str]]:
    groups: dict[tuple[str, ...], set[str]] = {}
    for node in nodes:
        groups.setdefault(tuple(node.labels[level] for level in levels), set()).add(node.name)
    return frozenset(frozenset(group) for group in groups.values())


@settings(max_examples=80)
@given(labelled_clusters(), st.sampled_from(["tree", "block"]))
def test_export_keeps_every_domain_of_every_level(nodes: list[NodeSpec], plugin: str) -> None:
    exportable = [n for n in nodes if n.schedulable and all(level in n.labels for level in _LEVELS)]
    topology = TopologySpec("zones", (*_LEVELS, HOSTNAME_LABEL))
    if not exportable:
        with pytest.raises(TopologyError):
            render_topology_conf(nodes, topology, plugin="tree")
        return
    conf = render_topology_conf(nodes, topology, plugin="tree" if plugin == "tree" else "block")
    reparsed, reparsed_topology = cluster_from_slurm(parse_topology_conf(conf), node_resources=P5)
    assert {node.name for node in reparsed} == {node.name for node in exportable}
    if plugin == "tree":
        for depth in (1, 2):
            assert _partition(reparsed, reparsed_topology.levels[:depth]) == _partition(
                exportable, _LEVELS[:depth]
            )
    else:
        assert _partition(reparsed, (SLURM_BLOCK_LABEL,)) == _partition(exportable, _LEVELS)


def chain_conf(depth: int) -> str:
    lines = [f"SwitchName=s{tier} Switches=s{tier + 1}" for tier in range(depth - 1)]
    return "\n".join([*lines, f"SwitchName=s{depth - 1} Nodes=n1"])


def test_a_tree_of_sixteen_tiers_is_read() -> None:
    assert parse_topology_conf(chain_conf(16)).depth == 16


def _reading_s(text: str) -> float:
    """The CPU time of reading ``text``, the least of three reads with the collector off: a
    collection of the whole test session's heap landing in one read is not the parser's."""
    times = []
    for _ in range(3):
        gc.disable()
        try:
            started = time.thread_time()
            with contextlib.suppress(TopologyError):
                parse_topology_conf(text)
            times.append(time.thread_time() - started)
        finally:
            gc.enable()
    return min(times)


@pytest.mark.parametrize("depth", [17, 2000, 19_000])
def test_a_switch_chain_deeper_than_sixteen_tiers_is_refused_at_once(depth: int) -> None:
    with pytest.raises(TopologyError, match="more than 16 tiers"):
        parse_topology_conf(chain_conf(depth))
    # the lines are read; the walk up stops at 16 tiers: about what reading as many leaves
    # costs (an unbounded walk would be quadratic in the depth), measured in the same run
    leaves = "\n".join(f"SwitchName=s{i} Nodes=n{i}" for i in range(depth))
    assert _reading_s(chain_conf(depth)) < 3 * _reading_s(leaves) + 0.5


def test_a_line_longer_than_the_limit_is_refused_naming_its_number() -> None:
    text = "SwitchName=s1 Nodes=n1\nSwitchName=s2 Nodes=" + "n," * 5_000_000 + "n\n"
    started = time.thread_time()
    with pytest.raises(TopologyError, match=r"topology.conf:2: .*longer than 65,536") as raised:
        parse_topology_conf(text)
    assert time.thread_time() - started < 1
    assert len(raised.value.render()) < 300


def test_more_switches_than_the_limit_are_refused() -> None:
    text = "\n".join(f"SwitchName=s{index} Nodes=n{index}" for index in range(20_001))
    with pytest.raises(TopologyError, match="more than 20,000 switches"):
        parse_topology_conf(text)


def test_more_nodes_than_the_limit_in_all_lines_are_refused() -> None:
    text = "\n".join(f"SwitchName=s{index} Nodes=r{index}-[0-59999]" for index in range(3))
    with pytest.raises(TopologyError, match=r"topology.conf:2: more than 100,000 nodes"):
        parse_topology_conf(text)
