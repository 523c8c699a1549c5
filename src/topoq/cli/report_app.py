"""Typer definition of ``topoq report usage``, the server's usage report; the rendering is in
:mod:`topoq.cli.server_commands`."""

from __future__ import annotations

from typing import Annotated

import typer

from topoq.cli.common import ServerOption, TokenOption
from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as


def register(app: typer.Typer) -> None:
    """Add ``report usage`` to the CLI."""
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
