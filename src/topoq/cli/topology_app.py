"""The topology verbs: ``topoq place`` and ``topoq topology show|validate|export`` read files
offline; ``topoq topology live`` draws a running server's tree."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from topoq.cli.common import (
    ClusterOption,
    InstanceTypeOption,
    OutFileOption,
    PodsOption,
    ServerOption,
    TokenOption,
    TopologyOption,
    guarded,
)
from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as

topology_app = typer.Typer(
    help="Read, check, draw and convert cluster topologies.", no_args_is_help=True
)


class ExportFormat(StrEnum):
    SLURM_TREE = "slurm-tree"
    SLURM_BLOCK = "slurm-block"
    KUEUE = "kueue"
    LABELS = "labels"
    NODELIST = "nodelist"
    CLUSTER = "cluster"


def place(
    workload: Annotated[
        Path,
        typer.Option(
            "--workload",
            "-w",
            help="A Kueue Workload, a topoq job file, a HyperPod PyTorch job or a Kubernetes "
            "manifest (a batch/v1 Job, a PyTorchJob, a Pod or a List of a group's Pods).",
        ),
    ],
    nodes: ClusterOption = None,
    topology: TopologyOption = None,
    pods: PodsOption = None,
    instance_type: InstanceTypeOption = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Place a workload on the cluster as a gang: where every pod goes, or why it cannot."""
    from topoq.cli.commands import run_place

    guarded(lambda: run_place(workload, nodes, topology, pods, instance_type, output))


@topology_app.command("show")
def topology_show(
    nodes: ClusterOption = None,
    topology: TopologyOption = None,
    pods: PodsOption = None,
    instance_type: InstanceTypeOption = None,
    depth: Annotated[
        int | None,
        typer.Option(
            min=1, help="Levels to draw (default: all, or all but the hosts on large clusters)."
        ),
    ] = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Draw the topology tree with free/total accelerators per domain."""
    from topoq.cli.commands import run_topology_show

    guarded(lambda: run_topology_show(nodes, topology, pods, instance_type, depth, output))


@topology_app.command("validate")
def topology_validate(
    nodes: ClusterOption = None,
    topology: TopologyOption = None,
    instance_type: InstanceTypeOption = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Check a topology: structure errors fail (exit 2); left-out nodes are reported."""
    from topoq.cli.commands import run_topology_validate

    guarded(lambda: run_topology_validate(nodes, topology, instance_type, output))


@topology_app.command("export")
def topology_export(
    to: Annotated[ExportFormat, typer.Option("--to", help="The format to write.")],
    nodes: ClusterOption = None,
    topology: TopologyOption = None,
    instance_type: InstanceTypeOption = None,
    out: OutFileOption = None,
) -> None:
    """Convert the topology: Slurm topology.conf (tree or block), a Kueue Topology, the kubectl
    label commands, a NodeList, or a topoq cluster file."""
    from topoq.cli.commands import run_topology_export

    guarded(lambda: run_topology_export(to.value, nodes, topology, instance_type, out))


def register(app: typer.Typer) -> None:
    """Add ``place`` and ``topology`` to the CLI."""
    app.command()(place)
    app.add_typer(topology_app, name="topology")

    @topology_app.command("live")
    def topology_live(
        depth: Annotated[
            int | None, typer.Option(min=1, help="Levels to draw (default: all).")
        ] = None,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """The running server's topology tree with free and used GPUs per domain, failed and
        cordoned nodes marked (-o json|yaml: the API's topology)."""
        from topoq.cli.console import make_console
        from topoq.cli.server_commands import (
            STATE_LEGEND,
            connected,
            node_states,
            outside_lines,
            topology_tree,
        )

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            topology = client.topology()
            if chosen is not Output.TABLE:
                print_as(chosen, topology, None)
                return
            marked = node_states(topology, client.nodes())
        console = make_console()
        console.print(topology_tree(topology, depth or len(topology.levels), marked))
        for line in outside_lines(topology):
            console.print(line, markup=False)
        if marked:
            console.print(STATE_LEGEND, style="dim", markup=False)
