"""Typer definition of ``topoq server``: the control plane (store, scheduler loop, executor
and REST API) in this process; the work is in :mod:`topoq.bootstrap`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from topoq.cli.common import guarded

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


def register(app: typer.Typer) -> None:
    """Add ``server`` to the CLI."""

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
                help="local (each pod a process here), kubernetes (each pod a Pod on the "
                "cluster of --kubeconfig) or slurm (each gang a Slurm job on the cluster of "
                "--slurm-conf)."
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
        slurm_conf: Annotated[
            Path | None,
            typer.Option(
                help="With --executor slurm: the cluster's slurm.conf (default: SLURM_CONF); "
                "its topology.conf beside it gives the switches.",
                show_default=False,
            ),
        ] = None,
        slurm_partition: Annotated[
            str,
            typer.Option(help="With --executor slurm: the partition topoq owns and submits to."),
        ] = "topoq",
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
                    slurm_conf=slurm_conf.resolve() if slurm_conf is not None else None,
                    slurm_partition=slurm_partition,
                ),
                LogSettings(log_format, log_level, access_log),
                keep_pods_on_exit=keep_pods_on_exit,
            )
        )
