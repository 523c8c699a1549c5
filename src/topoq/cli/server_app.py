"""Typer definitions of the server verbs (``topoq server``, ``submit``, ``list``, …); the work
is in :mod:`topoq.cli.server_commands`, which uses the HTTP client alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from topoq.cli.output import JsonAliasOption, Output, OutputOption, chosen_output, print_as
from topoq.domain.limits import DEFAULT_LOG_READ_BYTES, MAX_LOG_READ_BYTES

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="The topoq server URL (default: TOPOQ_SERVER, the config "
        "file, or http://127.0.0.1:8750).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="An API token (default: TOPOQ_TOKEN, TOPOQ_TOKEN_FILE, the "
        "config file, or a local server's .topoq/admin-token).",
        show_default=False,
    ),
]


def log_bytes_option(what: str) -> Any:
    """A byte count of a log read: bounded as the API bounds it."""
    return typer.Option(
        min=1,
        max=MAX_LOG_READ_BYTES,
        help=f"{what} (default {DEFAULT_LOG_READ_BYTES >> 20} MiB, at most "
        f"{MAX_LOG_READ_BYTES >> 20} MiB).",
    )


LOG_FORMAT_CHOICES = ("text", "json")
LOG_LEVEL_CHOICES = ("debug", "info", "warning", "error")
"""``topoq.server_log``'s formats and levels (not imported here: it would slow every verb)."""


def choice_option(choices: tuple[str, ...], help_text: str) -> Any:
    """An option that takes one of ``choices``; another value is a usage error (exit 2)."""

    def check(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return typer.Option(callback=check, metavar=f"[{'|'.join(choices)}]", help=help_text)


JobArgument = Annotated[str, typer.Argument(help="The job id.")]
NodeArgument = Annotated[str, typer.Argument(help="The node name.")]


def register(app: typer.Typer, node_app: typer.Typer, policy_app: typer.Typer) -> None:  # noqa: PLR0915 - one definition per verb
    """Add the server verbs to the CLI."""

    @app.command()
    def server(
        host: str = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8750,
        database: Annotated[
            str | None,
            typer.Option(
                help="postgresql://… (default: TOPOQ_DATABASE_URL, else SQLite in the data "
                "directory). A password given here shows in `ps`: put the URL in "
                "TOPOQ_DATABASE_URL, or the password in PGPASSFILE or PGPASSWORD.",
                show_default=False,
            ),
        ] = None,
        data_dir: Annotated[
            Path,
            typer.Option(
                help="Where the store, logs and token live (made private to you: 0700, files 0600)."
            ),
        ] = Path(".topoq"),
        cluster: Annotated[
            Path | None,
            typer.Option(help="The cluster (any format `topoq place` reads; default: the example)"),
        ] = None,
        policy: Annotated[
            Path | None, typer.Option(help="A policy file to apply on start.")
        ] = None,
        executor: Annotated[
            str,
            typer.Option(
                help="local (each pod a process here) or kubernetes (each pod a Pod on the "
                "cluster of --kubeconfig)."
            ),
        ] = "local",
        kubeconfig: Annotated[
            Path | None,
            typer.Option(
                help="With --executor kubernetes: the cluster (default: KUBECONFIG, then "
                "~/.kube/config).",
                show_default=False,
            ),
        ] = None,
        node_selector: Annotated[
            str,
            typer.Option(
                help="With --executor kubernetes: the nodes topoq places on (a label selector)."
            ),
        ] = "",
        namespace_pattern: Annotated[
            str,
            typer.Option(
                help="With --executor kubernetes: each team's namespace ({team} is its name)."
            ),
        ] = "{team}",
        topology_levels: Annotated[
            str | None,
            typer.Option(
                help="Node labels of the topology levels, broadest first, comma-separated "
                "(default: the cluster file's; with --executor kubernetes, "
                "topology.k8s.aws/network-node-layer-1..3,kubernetes.io/hostname).",
                show_default=False,
            ),
        ] = None,
        kube_qps: Annotated[
            float,
            typer.Option(
                help="With --executor kubernetes: requests a second to the API server, on average."
            ),
        ] = 50.0,
        kube_burst: Annotated[
            int, typer.Option(help="With --executor kubernetes: requests at once, at most.")
        ] = 100,
        kube_concurrency: Annotated[
            int,
            typer.Option(
                help="With --executor kubernetes: connections that make and delete objects."
            ),
        ] = 8,
        cluster_jobs: Annotated[
            bool,
            typer.Option(
                help="With --executor kubernetes: take in the cluster's suspended Jobs that "
                "name a team's queue (kueue.x-k8s.io/queue-name; docs/executors.md)."
            ),
        ] = True,
        api_workers: Annotated[
            int,
            typer.Option(
                min=1, help="API processes to start beside the controller's own (ADR 0004)."
            ),
        ] = 1,
        api_spares: Annotated[
            int,
            typer.Option(
                min=0,
                help="Warmed API processes kept waiting: one replaces an API process that "
                "dies within milliseconds instead of a cold start of seconds (0: none).",
            ),
        ] = 1,
        pod_log_limit: Annotated[
            str,
            typer.Option(
                help="What the local executor keeps of each pod's output on disk (rotated "
                "into pod-N.log.1 past half of it).",
            ),
        ] = "64Mi",
        log_format: Annotated[
            str,
            choice_option(
                LOG_FORMAT_CHOICES,
                "The server log on stderr: text (one readable line per event) or json (one "
                "object per line); every process of the server writes it (docs/operations.md "
                "lists the events).",
            ),
        ] = "text",
        log_level: Annotated[
            str, choice_option(LOG_LEVEL_CHOICES, "The least severe records the log keeps.")
        ] = "info",
        access_log: Annotated[
            bool,
            typer.Option(
                help="Also log one line per HTTP request: method, path, status, duration "
                "and the token's name (never the token)."
            ),
        ] = False,
        keep_pods_on_exit: Annotated[
            bool,
            typer.Option(
                "--keep-pods-on-exit",
                help="A clean stop (SIGTERM, Ctrl-C) leaves running pods running, for the next "
                "server on the same data directory to adopt: an upgrade without stopping the "
                "work (the Kubernetes executor's pods always run on).",
            ),
        ] = False,
    ) -> None:
        """Run the control plane: store, scheduler loop, executor and REST API.

        The first start writes an admin token to DATA_DIR/admin-token. Without a token only
        /healthz, /metrics (per-team figures) and the API docs (/docs, /redoc,
        /openapi.json) answer (docs/api.md)."""
        from topoq.bootstrap import ClusterAccess, serve, topology_levels_option
        from topoq.cli.app import guarded
        from topoq.server_log import LogSettings

        guarded(
            lambda: serve(
                host,
                port,
                database,
                data_dir,
                cluster,
                policy,
                executor,
                api_workers,
                api_spares,
                pod_log_limit,
                ClusterAccess(
                    kubeconfig.resolve() if kubeconfig is not None else None,
                    node_selector,
                    namespace_pattern,
                    topology_levels_option(topology_levels),
                    qps=kube_qps,
                    burst=kube_burst,
                    concurrency=kube_concurrency,
                    cluster_jobs=cluster_jobs,
                ),
                LogSettings(log_format, log_level, access_log),
                keep_pods_on_exit=keep_pods_on_exit,
            )
        )

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
        from topoq.cli.app import guarded
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
        from topoq.cli.console import make_console
        from topoq.cli.output import counted
        from topoq.cli.server_commands import connected, jobs_table, waiting_reason

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            page = client.jobs(team=team, phase=phase, user=user, limit=limit)
            if chosen is not Output.TABLE:
                print_as(chosen, page, None)
                return
            explained = {
                row.id: client.explain(row.id)
                for row in page.items
                if row.phase.value == "pending" and row.visible
            }
        reasons = {job: waiting_reason(answer) for job, answer in explained.items()}
        etas = {job: a.eta_at for job, a in explained.items() if a.eta_at is not None}
        make_console().print(jobs_table(page.items, reasons, etas))
        typer.echo(f"{len(page.items)} of {counted(page.total, 'job')}")

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
        from topoq.cli.app import guarded
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

    @app.command()
    def nodes(
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Nodes: state (ready, cordoned or failed), GPUs in use, CPUs and memory, the jobs on
        them."""
        from topoq.cli.console import make_console
        from topoq.cli.server_commands import connected, nodes_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            found = client.nodes()
        if chosen is Output.TABLE:
            make_console().print(nodes_table(found))
        else:
            print_as(chosen, found, None)

    for verb in ("cordon", "uncordon", "drain"):
        _node_action(app, verb)
    for verb in ("fail", "recover"):
        _node_action(node_app, verb)

    @app.command()
    def teams(
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
        as_json: JsonAliasOption = False,
    ) -> None:
        """Per team and flavor: GPUs guaranteed, used, borrowed and lent."""
        from topoq.cli.console import make_console
        from topoq.cli.server_commands import connected, teams_table

        chosen = chosen_output(output, as_json)
        with connected(server, token) as client:
            found = client.teams()
        if chosen is Output.TABLE:
            make_console().print(teams_table(found))
        else:
            print_as(chosen, found, None)

    @policy_app.command("apply")
    def policy_apply(
        file: Annotated[Path, typer.Argument(help="A topoq policy file (kind: Policy).")],
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
    ) -> None:
        """Make a policy file the server's policy (a new version; admins only); prints the
        version and the lint's warnings (-o json|yaml: the policy as the API answered)."""
        from topoq.cli.app import guarded
        from topoq.cli.server_commands import connected

        def run() -> None:
            document = read_policy_document(file)
            with connected(server, token) as client:
                applied = client.apply_policy(document)
            if output is not Output.TABLE:
                print_as(output, applied, None)
                return
            typer.echo(f"policy version {applied.version} is in force")
            for warning in applied.warnings:
                typer.echo(f"warning: {warning.code}: {warning.message} ({warning.hint})", err=True)

        guarded(run)

    @policy_app.command("current")
    def policy_current(
        server: ServerOption = None,
        token: TokenOption = None,
        output: Annotated[
            Output,
            typer.Option(
                "--output",
                "-o",
                help="yaml (the policy file, after a '# version N' line), json (the API's "
                "answer: version and document) or table (as policy show prints it).",
            ),
        ] = Output.YAML,
    ) -> None:
        """The server's policy in force: as a policy file (YAML) by default."""
        import yaml

        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            current = client.policy()
        if output is Output.JSON:
            print_as(output, current, None)
        elif output is Output.YAML:
            typer.echo(f"# version {current.version}")
            typer.echo(yaml.safe_dump(current.document, sort_keys=False), nl=False)
        else:
            from topoq.cli.app import guarded
            from topoq.cli.policy_commands import show_policy
            from topoq.discovery.policy import policy_from_document

            source = f"policy version {current.version}"
            guarded(
                lambda: show_policy(policy_from_document(current.document, source=source), "table")
            )

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


def read_policy_document(file: Path) -> dict[str, object]:
    """The policy file's document, checked locally first so errors name lines of the file."""
    from topoq.discovery.documents import read_document
    from topoq.discovery.policy import policy_from_document
    from topoq.domain.errors import InvalidInputError

    document = read_document(file)
    policy_from_document(document, source=str(file))
    if not isinstance(document, dict):
        raise InvalidInputError("expected a policy document", where=str(file))
    return document


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
