"""What each offline command does: load inputs, call the core, print the result."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from rich.console import Console

from topoq.cli.console import emit, make_console
from topoq.cli.output import Output, counted, print_document
from topoq.cli.render import (
    placement_document,
    print_placement,
    topology_document,
    topology_tree,
)
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.tree import TopologyTree, build_tree
from topoq.discovery.jobfile import load_workload
from topoq.discovery.sources import LoadedCluster, load_cluster
from topoq.domain.errors import TopologyError

LARGE_TREE_LEAVES = 64
"""Above this many hosts, `topology show` stops one level above the hosts unless asked."""


def _console() -> Console:
    return make_console()


def warn_about(cluster: LoadedCluster, *, example: bool) -> None:
    """Say on standard error that the example cluster is used, and the reader's warnings."""
    err = make_console(stderr=True)
    if example:
        err.print(
            f"[dim]note: no --nodes given, so this is topoq's example cluster "
            f"({len(cluster.nodes)} nodes); pass --nodes FILE for yours[/]"
        )
    for warning in cluster.warnings:
        err.print(f"[yellow]warning:[/] {warning}")


def _ledger(cluster: LoadedCluster) -> CapacityLedger:
    tree = build_tree(cluster.nodes, cluster.topology)
    return CapacityLedger.with_usage(tree, cluster.used)


def run_place(
    workload_path: Path,
    nodes: Path | None,
    topology: Path | None,
    pods: Path | None,
    instance_type: str | None,
    output: Output,
) -> None:
    workload = load_workload(workload_path)
    cluster = load_cluster(nodes, topology=topology, pods=pods, slurm_instance_type=instance_type)
    warn_about(cluster, example=nodes is None)
    result, _ = place_workload(_ledger(cluster), workload)
    if output is Output.TABLE:
        print_placement(_console(), result, cluster.topology.levels)
    else:
        print_document(output, placement_document(result))


def run_topology_show(
    nodes: Path | None,
    topology: Path | None,
    pods: Path | None,
    instance_type: str | None,
    depth: int | None,
    output: Output,
) -> None:
    cluster = load_cluster(nodes, topology=topology, pods=pods, slurm_instance_type=instance_type)
    warn_about(cluster, example=nodes is None)
    ledger = _ledger(cluster)
    if output is not Output.TABLE:
        print_document(output, topology_document(ledger))
        return
    tree = ledger.tree
    if depth is None:
        large = tree.leaf_level.size > LARGE_TREE_LEAVES and tree.depth > 1
        depth = tree.depth - 1 if large else tree.depth
    console = _console()
    console.print(topology_tree(ledger, depth))
    if depth < tree.depth:
        hidden = counted(len(tree.nodes), "node")
        console.print(f"[dim](hosts hidden: {hidden}; use --depth {tree.depth})[/]")
    _print_excluded(console, tree)


def _print_excluded(console: Console, tree: TopologyTree) -> None:
    if tree.excluded:
        console.print(f"left out of the topology: {counted(len(tree.excluded), 'node')}")
        for node in tree.excluded:
            console.print(f"  {node.name}: {node.detail}")


def run_topology_validate(
    nodes: Path | None, topology: Path | None, instance_type: str | None, output: Output
) -> None:
    cluster = load_cluster(nodes, topology=topology, slurm_instance_type=instance_type)
    tree = build_tree(cluster.nodes, cluster.topology)
    if not tree.nodes:
        raise TopologyError(
            f"the topology is empty: none of the {len(cluster.nodes)} nodes is Ready, "
            "schedulable and labelled with every level",
            where=str(nodes) if nodes else None,
            hint="check the level labels: " + ", ".join(cluster.topology.levels),
        )
    summary = {
        "format": cluster.format.value,
        "topology": cluster.topology.name,
        "levels": [{"label": level.label, "domains": level.size} for level in tree.levels],
        "nodes": len(tree.nodes),
        "excluded": [
            {"node": e.name, "reason": e.reason.value, "detail": e.detail} for e in tree.excluded
        ],
        "warnings": list(cluster.warnings),
        "valid": True,
    }
    if output is not Output.TABLE:
        print_document(output, summary)
        return
    console = _console()
    console.print(
        f"[green]valid[/] {cluster.format.value}: {counted(len(tree.nodes), 'node')} in "
        f"{counted(tree.depth, 'level')}"
    )
    for level in tree.levels:
        console.print(f"  {level.label}: {counted(level.size, 'domain')}")
    for warning in cluster.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    _print_excluded(console, tree)


def run_topology_export(
    to: str, nodes: Path | None, topology: Path | None, instance_type: str | None, out: Path | None
) -> None:
    from topoq.discovery.clusterfile import cluster_document
    from topoq.discovery.kubernetes import (
        kueue_topology_document,
        node_label_commands,
        nodelist_document,
    )
    from topoq.discovery.slurm_export import render_topology_conf

    cluster = load_cluster(nodes, topology=topology, slurm_instance_type=instance_type)
    warn_about(cluster, example=nodes is None)
    spec, members = cluster.topology, list(cluster.nodes)
    if to in ("slurm-tree", "slurm-block"):
        text = render_topology_conf(members, spec, plugin="tree" if to == "slurm-tree" else "block")
    elif to == "kueue":
        text = yaml.safe_dump(kueue_topology_document(spec), sort_keys=False)
    elif to == "labels":
        text = "\n".join(node_label_commands(members, spec)) + "\n"
    elif to == "nodelist":
        text = json.dumps(nodelist_document(members), indent=2) + "\n"
    else:
        text = yaml.safe_dump(cluster_document(members, spec, cluster.name), sort_keys=False)
    emit(text, out)
