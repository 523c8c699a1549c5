"""The tree plugin: ``SwitchName=`` lines built into switches and checked to form proper trees.

Checks, each naming the line(s) involved: a switch lists exactly one of Nodes= and Switches=;
names are unique; every child switch exists and has one parent; no cycles; a node hangs off one
leaf switch; and every leaf switch is the same number of tiers below its root (topoq gives each
tier a node label, so trees of mixed depth have no consistent levels).
"""

from __future__ import annotations

import difflib

from topoq.discovery.slurm_lines import (
    ConfLine,
    NodeCount,
    at,
    check_nodes_listed_once,
    check_single_name,
    check_unique_names,
    expand_names,
)
from topoq.discovery.slurm_model import MAX_SWITCH_NAME_LENGTH, SlurmSwitch, SlurmTopology
from topoq.domain.errors import TopologyError
from topoq.domain.topology import MAX_LEVELS


def build_switches(lines: list[ConfLine], source: str) -> tuple[SlurmSwitch, ...]:
    listed = NodeCount(source)
    switches = tuple(_switch_from_line(line, source, listed) for line in lines)
    check_unique_names(switches, kind="switch", key="SwitchName", source=source)
    _check_child_references(switches, source)
    tree = SlurmTopology(plugin="tree", switches=switches, source=source)
    _check_no_cycles(tree)
    check_nodes_listed_once(switches, kind="leaf switch", source=source)
    _check_equal_depths(tree)
    return switches


def _switch_from_line(line: ConfLine, source: str, listed: NodeCount) -> SlurmSwitch:
    check_single_name(line, source)
    if len(line.name) > MAX_SWITCH_NAME_LENGTH:
        raise TopologyError(
            f"switch name {line.name!r} is {len(line.name)} characters long",
            where=at(source, line.number),
            hint=f"Slurm accepts at most {MAX_SWITCH_NAME_LENGTH}; shorten it",
        )
    has_nodes, has_switches = "Nodes" in line.values, "Switches" in line.values
    if has_nodes and has_switches:
        raise TopologyError(
            f"switch {line.name} lists both Nodes= and Switches=",
            where=at(source, line.number),
            hint="a leaf switch lists Nodes=, a higher switch lists Switches=; "
            "put the nodes under a new leaf switch and list that in Switches=",
        )
    if not has_nodes and not has_switches:
        raise TopologyError(
            f"switch {line.name} lists neither Nodes= nor Switches=",
            where=at(source, line.number),
            hint="add Nodes=<hostlist> for a leaf switch or Switches=<names>, or remove the line",
        )
    return SlurmSwitch(
        name=line.name,
        nodes=listed.expand(line, "Nodes") if has_nodes else (),
        switches=expand_names(line, "Switches", source) if has_switches else (),
        link_speed=_link_speed(line, source),
        line=line.number,
    )


def _link_speed(line: ConfLine, source: str) -> int | None:
    text = line.values.get("LinkSpeed")
    if text is None:
        return None
    if not text.isdecimal():
        raise TopologyError(
            f"LinkSpeed={text} is not a whole number",
            where=at(source, line.number),
            hint="give LinkSpeed= as a non-negative integer or leave it out",
        )
    return int(text)


def _check_child_references(switches: tuple[SlurmSwitch, ...], source: str) -> None:
    known = {switch.name for switch in switches}
    parent_of: dict[str, SlurmSwitch] = {}
    for switch in switches:
        for child in switch.switches:
            if child not in known:
                raise TopologyError(
                    f"switch {switch.name} lists unknown switch {child!r} in Switches=",
                    where=at(source, switch.line),
                    hint=f"add a line 'SwitchName={child} Nodes=…' or fix the name"
                    + _closest(child, known),
                )
            earlier = parent_of.get(child)
            if earlier is not None:
                raise TopologyError(
                    f"switch {child} is a child of both {earlier.name} (line {earlier.line}) "
                    f"and {switch.name} (line {switch.line})",
                    where=at(source, switch.line),
                    hint=f"a switch has one parent; remove {child} from one of the Switches= lists",
                )
            parent_of[child] = switch


def _check_no_cycles(tree: SlurmTopology) -> None:
    """No switch is above itself, and no chain of switches is deeper than a topology can be
    (``MAX_LEVELS`` tiers): each walk up stops there, so the check is linear in the switches."""
    for switch in tree.switches:
        chain = [switch.name]
        above = {switch.name}
        while chain[-1] in tree.parents:
            parent = tree.parents[chain[-1]]
            if parent in above:
                cycle = [parent, *reversed(chain[chain.index(parent) :])]
                raise TopologyError(
                    "switches form a cycle: " + " → ".join(cycle) + " (each lists the next "
                    "in Switches=)",
                    where=at(tree.source, tree.switches_by_name[parent].line),
                    hint="a switch cannot be below itself; remove one link of the cycle "
                    "from a Switches= list",
                )
            chain.append(parent)
            above.add(parent)
            if len(chain) > MAX_LEVELS:
                raise TopologyError(
                    f"switch {switch.name} has more than {MAX_LEVELS} tiers of switches "
                    f"above and including it ({' > '.join(reversed(chain[-3:]))} …)",
                    where=at(tree.source, switch.line),
                    hint=f"a topology has at most {MAX_LEVELS} levels; check Switches= for a "
                    "chain or a cycle",
                )


def _check_equal_depths(tree: SlurmTopology) -> None:
    leaves = [switch for switch in tree.switches if switch.is_leaf]
    if not leaves:
        return
    reference = leaves[0]
    reference_path = tree.switch_path(reference.name)
    for leaf in leaves[1:]:
        path = tree.switch_path(leaf.name)
        if len(path) != len(reference_path):
            raise TopologyError(
                f"leaf switches sit at different depths: {leaf.name} (line {leaf.line}) "
                f"is {_tiers(path)}, but {reference.name} (line {reference.line}) "
                f"is {_tiers(reference_path)}",
                where=at(tree.source, leaf.line),
                hint="every leaf switch must be the same number of tiers below its root; "
                "add the missing switch tier above the shallower leaves",
            )


def _tiers(path: tuple[str, ...]) -> str:
    if len(path) == 1:
        return "a root itself (1 tier)"
    return f"{len(path)} tiers deep ({' > '.join(path)})"


def _closest(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]}?" if close else ""
