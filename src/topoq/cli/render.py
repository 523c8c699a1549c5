"""Placement results and topology trees as JSON documents and as Rich tables (numpy and the
core's ledger: only the offline verbs that place import this; the console and plain tables every
verb uses are ``topoq.cli.console``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from topoq.cli.output import counted
from topoq.core.ledger import CapacityLedger
from topoq.core.tree import TopologyTree
from topoq.domain.node import HOSTNAME_LABEL
from topoq.domain.placement import DomainAssignment, PlacementResult, PodSetOutcome
from topoq.domain.quantity import NEURON_DEVICE, NVIDIA_GPU

MAX_NODE_LIST_WIDTH = 40


def placement_document(result: PlacementResult) -> dict[str, Any]:
    return {
        "workload": result.workload,
        "admitted": result.admitted,
        "podsets": [_pod_set_document(outcome) for outcome in result.pod_sets],
    }


def _pod_set_document(outcome: PodSetOutcome) -> dict[str, Any]:
    diagnosis = outcome.diagnosis
    document: dict[str, Any] = {
        "name": outcome.name,
        "count": outcome.count,
        "result": "assigned" if diagnosis is None else "unschedulable",
        "reason": None if diagnosis is None else diagnosis.reason.value,
        "assignment": [_assignment_document(a) for a in outcome.assignments],
    }
    if diagnosis is None:
        document["span"] = dict(outcome.span)
    else:
        document["message"] = diagnosis.message
        document["numbers"] = dict(diagnosis.numbers)
        document["excludedNodes"] = dict(diagnosis.excluded_nodes)
        document["relaxations"] = list(diagnosis.relaxations)
    return document


def _assignment_document(assignment: DomainAssignment) -> dict[str, Any]:
    """One leaf's pods; on a node open to GPU shares, each pod's GPU devices too (as the
    API's ``gpuDevices``)."""
    document: dict[str, Any] = {
        "node": assignment.node,
        "domain": dict(assignment.domain),
        "count": assignment.count,
        "firstRank": assignment.first_rank,
    }
    if assignment.gpu_devices:
        document["gpuDevices"] = [list(devices) for devices in assignment.gpu_devices]
    return document


def print_placement(console: Console, result: PlacementResult, levels: tuple[str, ...]) -> None:
    verdict = "[green]admitted[/]" if result.admitted else "[red]not admitted[/]"
    console.print(f"workload [bold]{result.workload}[/]: {verdict}")
    for outcome in result.pod_sets:
        if outcome.diagnosis is None:
            _print_assigned(console, outcome, levels)
        else:
            _print_unschedulable(console, outcome)


def _print_assigned(console: Console, outcome: PodSetOutcome, levels: tuple[str, ...]) -> None:
    """One row per domain just above the hosts, with the hosts as a hostlist expression."""
    from topoq.discovery.hostlist import compress_hostlist

    spans = ", ".join(f"{count} {_short(label)}" for label, count in outcome.span.items())
    console.print(
        f"pod set [bold]{outcome.name}[/]: {counted(outcome.count, 'pod')} assigned, "
        f"spanning {spans}"
    )
    table = Table()
    table.add_column("ranks", justify="right")
    table.add_column("pods", justify="right")
    table.add_column("nodes", overflow="fold")
    domain_levels = tuple(label for label in levels if label != HOSTNAME_LABEL)
    for label in domain_levels:
        table.add_column(_short(label))
    devices = any(row.gpu_devices for row in outcome.assignments)
    if devices:  # nodes open to GPU shares: which device each pod takes, in rank order
        table.add_column("GPU devices", overflow="fold")
    for rows in _consecutive_by_domain(outcome.assignments, domain_levels):
        first, last = rows[0].first_rank, rows[-1].first_rank + rows[-1].count - 1
        names = [row.node for row in rows if row.node is not None]
        table.add_row(
            str(first) if first == last else f"{first}-{last}",
            str(sum(row.count for row in rows)),
            _node_list(names, compress_hostlist) if names else "(pooled)",
            *(rows[0].domain.get(label, "") for label in domain_levels),
            *((_devices_text(rows),) if devices else ()),
        )
    console.print(table)


def _devices_text(rows: list[DomainAssignment]) -> str:
    """Each pod's GPU devices, in rank order (``-``: any free GPUs of its node)."""
    pods = [
        ",".join(map(str, devices)) if row.gpu_devices else "-"
        for row in rows
        for devices in (row.gpu_devices or ((),) * row.count)
    ]
    return " ".join(pods)


def _node_list(names: list[str], compress: Callable[[list[str]], str]) -> str:
    """A hostlist expression when it is short, else the first and last node."""
    if len(names) == 1:
        return names[0]
    text = compress(names)
    return text if len(text) <= MAX_NODE_LIST_WIDTH else f"{names[0]} … {names[-1]}"


def _consecutive_by_domain(
    assignments: tuple[DomainAssignment, ...], levels: tuple[str, ...]
) -> list[list[DomainAssignment]]:
    groups: list[list[DomainAssignment]] = []
    for assignment in assignments:
        key = [assignment.domain.get(label) for label in levels]
        if groups and [groups[-1][0].domain.get(label) for label in levels] == key:
            groups[-1].append(assignment)
        else:
            groups.append([assignment])
    return groups


def _print_unschedulable(console: Console, outcome: PodSetOutcome) -> None:
    diagnosis = outcome.diagnosis
    if diagnosis is None:  # pragma: no cover - callers check
        return
    console.print(
        f"pod set [bold]{outcome.name}[/] ({counted(outcome.count, 'pod')}): "
        f"[red]{diagnosis.reason.value}[/]"
    )
    console.print(f"  {diagnosis.message}", highlight=False)
    if diagnosis.excluded_nodes:
        causes = ", ".join(
            f"{count} {cause.replace('_', ' ')}"
            for cause, count in diagnosis.excluded_nodes.items()
        )
        console.print(f"  nodes that cannot take a pod: {causes}", highlight=False)
    for relaxation in diagnosis.relaxations:
        console.print(f"  would fit now if you: {relaxation}", highlight=False)


def _short(label: str) -> str:
    """``topology.k8s.aws/network-node-layer-2`` → ``network-node-layer-2``."""
    return label.rsplit("/", 1)[-1]


def accelerator_column(tree: TopologyTree) -> tuple[str, int | None]:
    """The accelerator resource to count (GPUs, else Neuron devices) and its ledger column."""
    for name, title in ((NVIDIA_GPU, "GPU"), (NEURON_DEVICE, "Neuron")):
        if name in tree.resource_column:
            return title, tree.resource_column[name]
    return "GPU", None


def topology_document(ledger: CapacityLedger) -> dict[str, Any]:
    tree = ledger.tree
    title, column = accelerator_column(tree)
    levels = []
    for level_index, level in enumerate(tree.levels):
        domains = []
        for domain in range(level.size):
            free, total = _free_total(ledger, level_index, domain, column)
            domains.append(
                {
                    "path": list(level.paths[domain]),
                    "free": free,
                    "total": total,
                    "nodes": int(level.node_start[domain + 1] - level.node_start[domain]),
                }
            )
        levels.append({"label": level.label, "domains": domains})
    return {
        "topology": tree.spec.name,
        "accelerator": title,
        "levels": levels,
        "excluded": [
            {"node": e.name, "reason": e.reason.value, "detail": e.detail} for e in tree.excluded
        ],
    }


def _free_total(
    ledger: CapacityLedger, level: int, domain: int, column: int | None
) -> tuple[int, int]:
    if column is None:
        return 0, 0
    start, end = ledger.tree.levels[level].node_start[domain : domain + 2]
    total = int(np.sum(ledger.tree.capacity[start:end, column]))
    return int(ledger.domain_free[level][domain, column]), total


def topology_tree(ledger: CapacityLedger, depth: int) -> Tree:
    tree = ledger.tree
    title, column = accelerator_column(tree)
    free_all = int(ledger.free[:, column].sum()) if column is not None else 0
    total_all = int(tree.capacity[:, column].sum()) if column is not None else 0
    root = Tree(
        f"[bold]{tree.spec.name}[/]: {counted(len(tree.nodes), 'node')}, "
        f"{free_all}/{total_all} {title} free"
    )
    parents: list[Tree] = [root]
    for level_index in range(min(depth, tree.depth)):
        level = tree.levels[level_index]
        current: list[Tree] = []
        for domain in range(level.size):
            free, total = _free_total(ledger, level_index, domain, column)
            nodes = int(level.node_start[domain + 1] - level.node_start[domain])
            parent = parents[0] if level.parent is None else parents[int(level.parent[domain])]
            name, kind = level.paths[domain][-1], _short(level.label)
            label = f"{name}  [dim]{kind}[/]  {free}/{total} {title} free"
            if level_index < tree.depth - 1:
                label += f"  [dim]({counted(nodes, 'node')})[/]"
            current.append(parent.add(label))
        parents = current
    return root
