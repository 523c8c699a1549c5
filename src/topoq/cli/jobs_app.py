"""The job verbs of a running server: ``topoq submit``, ``list``, ``describe``, ``explain``,
``cancel``, ``hold``, ``release`` and ``logs``; the work is in :mod:`topoq.cli.server_commands`,
which uses the HTTP client alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from topoq.cli.common import ServerOption, TokenOption, guarded, one_line
from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as
from topoq.domain.limits import DEFAULT_LOG_READ_BYTES, MAX_LOG_READ_BYTES

JobArgument = Annotated[str, typer.Argument(help="The job id.")]


def log_bytes_option(what: str) -> Any:
    """A byte count of a log read: bounded as the API bounds it."""
    return typer.Option(
        min=1,
        max=MAX_LOG_READ_BYTES,
        help=f"{what} (default {DEFAULT_LOG_READ_BYTES >> 20} MiB, at most "
        f"{MAX_LOG_READ_BYTES >> 20} MiB).",
    )


def register(app: typer.Typer) -> None:
    """Add the job verbs to the CLI."""

    @app.command()
    def submit(
        file: Annotated[
            Path,
            typer.Argument(
                help="A topoq job file, HyperPod job, Kueue Workload, or Kubernetes manifest "
                "(batch/v1 Job, HyperPodPyTorchJob, PyTorchJob, a Pod or a List of a group's "
                "Pods)."
            ),
        ],
        form: Annotated[
            str | None,
            typer.Option(
                "--format", help="topoq, hyperpod, kueue or kubernetes (default: detected)."
            ),
        ] = None,
        team: Annotated[str | None, typer.Option(help="The team to charge.")] = None,
        priority: Annotated[str | None, typer.Option(help="The priority class.")] = None,
        job_id: Annotated[
            str | None, typer.Option("--id", help="The job id (default: the document's name).")
        ] = None,
        max_retry: Annotated[int | None, typer.Option(help="Restarts after a failure.")] = None,
        time_limit: Annotated[
            str | None,
            typer.Option(
                "--time",
                help="Time limit: seconds, 90m, 2h or 1-00:00:00; stopped when it runs longer.",
            ),
        ] = None,
        after_ok: Annotated[
            list[str] | None,
            typer.Option("--after-ok", help="Start only after this job succeeded (repeatable)."),
        ] = None,
        after_any: Annotated[
            list[str] | None,
            typer.Option("--after-any", help="Start only after this job ended (repeatable)."),
        ] = None,
        after_failed: Annotated[
            list[str] | None,
            typer.Option("--after-failed", help="Start only after this job failed (repeatable)."),
        ] = None,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Submit a job; prints its id, team and phase (-o json|yaml: the job as the API
        answered)."""
        from topoq.cli.server_commands import connected, submission
        from topoq.domain.job import DependencyKind

        after = {
            DependencyKind.AFTER_OK: after_ok or [],
            DependencyKind.AFTER_ANY: after_any or [],
            DependencyKind.AFTER_FAILED: after_failed or [],
        }

        def run() -> None:
            request = submission(file, form, team, priority, job_id, max_retry, after, time_limit)
            with connected(server, token) as client:
                job = client.submit(request)
            print_as(
                chosen_output(output, as_json),
                job,
                lambda: f"{job.id} submitted to team {job.team} ({job.phase.value})",
            )
            for warning in job.warnings:  # accepted as written, but the user should know
                typer.echo(f"warning: {one_line(warning)}", err=True)

        guarded(run)

    @app.command("list")
    def list_jobs(
        team: str | None = None,
        phase: str | None = None,
        user: str | None = None,
        limit: int = 100,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Jobs, newest first (like squeue): team, user, priority, phase, GPUs, age, placement
        span per level, and why pending jobs wait (-o json|yaml: the page the API answered)."""
        from topoq.cli.output import counted
        from topoq.cli.server_commands import connected, jobs_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            page = client.jobs(team=team, phase=phase, user=user, limit=limit)
        print_as(
            chosen,
            page,
            lambda: f"{jobs_table(page.items)}\n{len(page.items)} of {counted(page.total, 'job')}",
        )

    _queue_command(app)

    @app.command()
    def describe(
        job: JobArgument,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.JSON,
    ) -> None:
        """Everything about one job: spec, placement, history (JSON by default; -o yaml, or
        -o table for its fields and history)."""
        from topoq.cli.server_commands import connected, job_table

        with connected(server, token) as client:
            found = client.job(job)
        print_as(output, found, lambda: job_table(found))

    @app.command()
    def explain(
        job: JobArgument,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Why a job waits, with the numbers, and what would change it."""
        from topoq.cli.server_commands import connected, explanation_lines

        with connected(server, token) as client:
            answer = client.explain(job, fresh=True)
        print_as(
            chosen_output(output, as_json), answer, lambda: "\n".join(explanation_lines(answer))
        )

    for verb in ("cancel", "hold", "release"):
        _job_action(app, verb)

    @app.command()
    def logs(
        job: JobArgument,
        pod: Annotated[int | None, typer.Option(min=0, help="One pod's output.")] = None,
        follow: Annotated[
            bool,
            typer.Option(
                "--follow",
                "-f",
                help="Print every line of every pod as it comes, once, prefixed by its pod "
                "when there are several, until the job ends; a requeue is said in a line "
                "and the new attempt followed from its start. Starts at the start of the "
                "logs, or where --tail, --tail-bytes or --since say.",
            ),
        ] = False,
        tail: Annotated[
            int | None,
            typer.Option(
                "--tail",
                help="The last this many lines of each pod (within --tail-bytes).",
                show_default=False,
            ),
        ] = None,
        since: Annotated[
            str | None,
            typer.Option(
                help="Only output written since then: a duration before now (90s, 10m, 2h, "
                "1h30m; a bare number is seconds) or an ISO time (2026-12-03T09:00:00Z, UTC "
                "when it names no zone). About a second precise: it may show up to a second "
                "of earlier output, never less.",
                show_default=False,
            ),
        ] = None,
        attempt: Annotated[
            int | None,
            typer.Option(
                help="Read this attempt's logs (from 1; default: the newest).", show_default=False
            ),
        ] = None,
        tail_bytes: Annotated[int | None, log_bytes_option("The last this many bytes")] = None,
        offset: Annotated[
            int | None,
            typer.Option(
                min=0,
                help="Read one pod's log (--pod) forward from this byte (the offset the last "
                "read said); not with --follow.",
            ),
        ] = None,
        limit_bytes: Annotated[
            int | None,
            log_bytes_option("With --offset, or --since without --tail: at most this many bytes"),
        ] = None,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """The job's captured output (every pod, or one; the newest attempt or --attempt): its
        tail in bytes or lines, what was written since a time, a range from --offset, or all
        of it as it comes with --follow."""
        from topoq.cli.log_commands import LogOptions, follow_logs, print_logs
        from topoq.cli.server_commands import connected

        def run() -> None:
            asked = LogOptions(pod, attempt, tail, tail_bytes, since, offset, limit_bytes)
            options = asked.checked(follow=follow)
            with connected(server, token) as client:
                if follow:
                    follow_logs(client, job, options)
                else:
                    print_logs(client, job, options)

        guarded(run)


def _queue_command(app: typer.Typer) -> None:
    """Add ``topoq queue``: the waiting jobs in scheduling order."""

    @app.command()
    def queue(
        team: str | None = None,
        limit: int = 100,
        offset: int = 0,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Waiting jobs in scheduling order: the next cycle's turn (#), the job, team,
        priority, GPUs, topology asked for, age, expected start and why it waits; held jobs
        and jobs waiting on another last (-o json|yaml: the page the API answered, with what
        would let each of your jobs start)."""
        from topoq.cli.output import counted
        from topoq.cli.server_commands import connected, queue_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            page = client.queue(team=team, limit=limit, offset=offset)
        print_as(
            chosen,
            page,
            lambda: (
                f"{queue_table(page.items)}\n{len(page.items)} of "
                f"{counted(page.total, 'waiting job')}, {page.in_line} in line"
            ),
        )


def _job_action(app: typer.Typer, verb: str) -> None:
    def action(
        job: JobArgument,
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
    ) -> None:
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            result = getattr(client, verb)(job)
        print_as(
            output,
            result,
            lambda: f"{result.id}: {result.phase.value}" + (" (held)" if result.held else ""),
        )

    action.__doc__ = {
        "cancel": "Cancel a job (its pods are stopped); prints its phase now.",
        "hold": "Keep a pending job from being admitted; prints its phase now.",
        "release": "Let a held job be admitted again; prints its phase now.",
    }[verb]
    app.command(verb)(action)
