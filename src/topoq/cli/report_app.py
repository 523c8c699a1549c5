"""Typer definitions of the server's read-only views: ``topoq report usage`` and ``topoq
topology live``; the rendering is in :mod:`topoq.cli.server_commands`."""

from __future__ import annotations

from typing import Annotated

import typer

from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as
from topoq.cli.server_app import ServerOption, TokenOption


def register(app: typer.Typer, topology_app: typer.Typer) -> None:
    """Add ``report usage`` to the CLI and ``live`` to ``topoq topology``."""
    report_app = typer.Typer(help="Reports from a running server.", no_args_is_help=True)
    app.add_typer(report_app, name="report")

    @report_app.command("usage")
    def report_usage(
        start: Annotated[
            str | None,
            typer.Option(
                "--from",
                help="The window's start: an ISO date (2024-05-01, midnight UTC), an ISO time "
                "or seconds since the epoch (default: 7 days before --to).",
                show_default=False,
            ),
        ] = None,
        end: Annotated[
            str | None,
            typer.Option(
                "--to", help="The window's end, not included (default: now).", show_default=False
            ),
        ] = None,
        team: Annotated[
            str | None,
            typer.Option(help="One team (default: every team the token may see)."),
        ] = None,
        jobs: Annotated[bool, typer.Option("--jobs", help="Also list every job's usage.")] = False,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """GPU-hours per team per UTC day, inside the guarantee and borrowed, with jobs run and
        preemptions suffered (and per job with --jobs)."""
        from topoq.cli.console import make_console
        from topoq.cli.server_commands import (
            connected,
            job_usage_table,
            usage_table,
            usage_title,
        )

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            report = client.usage_report(start, end, team)
        if chosen is not Output.TABLE:
            print_as(chosen, report, None)
            return
        console = make_console()
        console.print(usage_title(report), style="bold", markup=False)
        if report.days:
            console.print(usage_table(report))
        else:
            console.print("no GPU was held in this window")
        if jobs and report.jobs:
            console.print()
            console.print(job_usage_table(report))

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
