"""What every command group of the ``topoq`` CLI shares: the options that name a server, a
token and a cluster, and the one-line handling of bad input (exit 2, no traceback)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer

EXIT_BAD_INPUT = 2
"""The exit code of bad input: a bad command line, a bad file, an answer that refused it."""

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


ClusterOption = Annotated[
    Path | None,
    typer.Option(
        "--nodes",
        "--cluster",
        "-n",
        help="The cluster: a Kubernetes NodeList (kubectl get nodes -o json), the JSON of "
        "'aws ec2 describe-instance-topology', a Slurm topology.conf, or a topoq cluster file. "
        "Default: topoq's example cluster.",
        show_default=False,
    ),
]
TopologyOption = Annotated[
    Path | None,
    typer.Option(
        "--topology",
        "-t",
        help="A Kueue Topology (its levels override the cluster's).",
        show_default=False,
    ),
]
PodsOption = Annotated[
    Path | None,
    typer.Option(
        "--pods",
        "-p",
        help="A PodList of running pods whose requests use capacity.",
        show_default=False,
    ),
]
InstanceTypeOption = Annotated[
    str | None,
    typer.Option(
        "--instance-type",
        help="Capacity of each node of a Slurm topology.conf (default p5.48xlarge).",
        show_default=False,
    ),
]
OutFileOption = Annotated[
    Path | None, typer.Option("--out", help="Write to this file instead of standard output.")
]


def guarded(action: Callable[[], None]) -> None:
    """Run a command; bad input ends with a one-line message and exit code 2, no traceback."""
    from topoq.domain.errors import TopoqError

    try:
        action()
    except TopoqError as error:
        fail(str(error))


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def one_line(message: str) -> str:
    """``message`` with line breaks and other control characters escaped (a key or value
    quoted from a bad file may hold them), so that an error is always one line."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
