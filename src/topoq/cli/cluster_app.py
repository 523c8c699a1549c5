"""The cluster verbs of a running server: ``topoq teams`` (each team against its quota),
``topoq events`` (recent phase changes), and ``topoq cluster apply FILE [--drain] [--dry-run]``,
which makes a cluster file the server's inventory and prints what changed — nodes added,
removed (with the gangs on them), changed (what, before and after) and the gangs requeued. The
file is any format ``topoq place`` reads, read here (its errors name its lines) and sent as a
topoq cluster file (``POST /cluster/apply``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topoq.cli.common import ServerOption, TokenOption, guarded
from topoq.cli.output import (
    JsonAliasOption,
    Output,
    OutputOption,
    chosen_output,
    print_as,
    table_of,
)

if TYPE_CHECKING:
    from topoq.wire.v1 import ChangedNodeModel, ClusterApplyResult

COLUMNS = ("CHANGE", "NODE", "WHAT", "GANGS")


def register(app: typer.Typer) -> None:
    """Add ``teams``, ``events`` and ``cluster apply`` to the CLI."""
    cluster_app = typer.Typer(
        help="The server's inventory: apply a cluster file to it.", no_args_is_help=True
    )
    app.add_typer(cluster_app, name="cluster")

    @app.command()
    def teams(
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Per team and flavor: GPUs guaranteed, used, borrowed and lent."""
        from topoq.cli.server_commands import connected, teams_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            found = client.teams()
        print_as(chosen, found, lambda: teams_table(found))

    @app.command()
    def events(
        limit: int = 50,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
    ) -> None:
        """Recent job phase changes, newest first."""
        from topoq.cli.server_commands import connected, events_table

        with connected(server, token) as client:
            found = client.events(limit)
        print_as(output, found, lambda: events_table(found))

    @cluster_app.command("apply")
    def cluster_apply(
        file: Annotated[
            Path,
            typer.Argument(
                help="The cluster: any format `topoq place` reads (a topoq cluster file, a "
                "Kubernetes NodeList, aws ec2 describe-instance-topology, Slurm topology.conf)."
            ),
        ],
        drain: Annotated[
            bool,
            typer.Option(
                "--drain",
                help="Requeue the gangs on nodes it removes or shrinks below what they hold "
                "(without it such a change is refused).",
            ),
        ] = False,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Only print the difference; change nothing.")
        ] = False,
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Make FILE the server's nodes (admins): nodes added, removed and changed in one
        step, audited. A node's cordon and health stay as they are."""
        from topoq.cli.server_commands import connected

        def run() -> None:
            document = cluster_file_document(file)
            with connected(server, token) as client:
                result = client.apply_cluster(document, drain=drain, dry_run=dry_run)
            print_as(output, result, lambda: difference_text(result))

        guarded(run)


def cluster_file_document(file: Path) -> dict[str, object]:
    """The cluster in FILE (any format) as a topoq cluster file."""
    from topoq.discovery.clusterfile import cluster_document
    from topoq.discovery.sources import load_cluster

    cluster = load_cluster(file)
    return cluster_document(cluster.nodes, cluster.topology, cluster.name)


def difference_text(result: ClusterApplyResult) -> str:
    """The difference as a table, then one line: what was (or would be) done."""
    rows = [("added", node.name, _amounts(node.allocatable), "-") for node in result.added]
    rows += [("removed", node.name, "-", _gangs(node.jobs)) for node in result.removed]
    rows += [
        (
            "changed",
            change.name,
            "; ".join(_what(change)),
            _gangs(change.jobs)
            + (f" (short of {', '.join(change.short_of)})" if change.short_of else ""),
        )
        for change in result.changed
    ]
    lines = [table_of(COLUMNS, rows)] if rows else []
    requeued = ", ".join(result.requeued) or "none"
    if result.dry_run:
        lines.append(
            f"dry run: nothing changed; {result.nodes} nodes once applied, gangs to "
            f"requeue: {requeued}"
        )
    elif result.applied:
        lines.append(f"applied: {result.nodes} nodes; gangs requeued: {requeued}")
    else:
        lines.append(f"no difference: the server's {result.nodes} nodes stay as they are")
    lines += [
        f"policy {finding.severity}: {finding.code}: {finding.message}"
        for finding in result.policy_findings
    ]
    return "\n".join(lines)


def _what(change: ChangedNodeModel) -> list[str]:
    """What changed on the node, before -> after."""
    parts = []
    for field in change.changed:
        if field == "allocatable":
            parts.append(
                f"allocatable {_amounts(change.allocatable_before)} -> "
                f"{_amounts(change.allocatable)}"
            )
        elif field == "labels":
            before, after = change.labels_before, change.labels
            moved = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            parts.append(
                "labels "
                + ", ".join(f"{k}: {before.get(k, '-')} -> {after.get(k, '-')}" for k in moved)
            )
        else:
            parts.append(field)
    return parts


def _amounts(amounts: dict[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in amounts.items() if name != "pods")


def _gangs(jobs: list[str]) -> str:
    return ", ".join(jobs) or "-"
