"""The node verbs of a running server: ``topoq nodes``, ``cordon``, ``uncordon``, ``drain`` and
``topoq node fail|recover``."""

from __future__ import annotations

from typing import Annotated

import typer

from topoq.cli.common import ServerOption, TokenOption
from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as

NodeArgument = Annotated[str, typer.Argument(help="The node name.")]


def register(app: typer.Typer) -> None:
    """Add the node verbs to the CLI."""
    node_app = typer.Typer(
        help="Mark nodes failed or recovered on a running server.", no_args_is_help=True
    )
    app.add_typer(node_app, name="node")

    @app.command()
    def nodes(
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Nodes: state (ready, cordoned or failed), GPUs in use, CPUs and memory, the jobs on
        them."""
        from topoq.cli.server_commands import connected, nodes_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            found = client.nodes()
        print_as(chosen, found, lambda: nodes_table(found))

    for verb in ("cordon", "uncordon", "drain"):
        _node_action(app, verb)
    for verb in ("fail", "recover"):
        _node_action(node_app, verb)


def _node_action(app: typer.Typer, verb: str) -> None:
    def action(
        node: NodeArgument,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
    ) -> None:
        from topoq.cli.server_commands import connected, node_action_line

        with connected(server, token) as client:
            result = client.node_action(node, verb)
        print_as(output, result, lambda: node_action_line(verb, result))

    action.__doc__ = {
        "cordon": "Keep new work off a node.",
        "uncordon": "Let new work onto a node.",
        "drain": "Cordon a node and requeue its gangs.",
        "fail": "Mark a node failed and stop its work (its gangs are requeued).",
        "recover": "Mark a failed node healthy again.",
    }[verb]
    app.command(verb)(action)
