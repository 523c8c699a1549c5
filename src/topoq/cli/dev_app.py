"""``topoq dev``: real outside systems on this machine for trying topoq, its tests, demos and
benchmarks (``topoq dev k8s up|down``, ``topoq dev slurm up|down``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def register(app: typer.Typer) -> None:
    from topoq.cli.common import guarded

    dev_app = typer.Typer(
        help="Test beds: real outside systems brought up on this machine.", no_args_is_help=True
    )
    app.add_typer(dev_app, name="dev")
    k8s_app = typer.Typer(
        help="A real Kubernetes control plane (API server, etcd, controller-manager, scheduler, "
        "KWOK nodes, Kueue on request) on 127.0.0.1.",
        no_args_is_help=True,
    )
    dev_app.add_typer(k8s_app, name="k8s")

    @k8s_app.command("up")
    def k8s_up(
        directory: Annotated[Path, typer.Argument(help="Where its state, logs and PIDs go.")],
        nodes: Annotated[int, typer.Option(help="Fake GPU nodes (8 GPUs each).")] = 16,
        levels: Annotated[
            int, typer.Option(help="Network layers above the nodes (1 to 3), as HyperPod labels.")
        ] = 3,
        kueue: Annotated[
            bool, typer.Option("--kueue", help="Start Kueue with its webhooks.")
        ] = False,
        assets: Annotated[
            Path | None,
            typer.Option(
                help="The programs' directory (bin/kube-apiserver, …); default $TOPOQ_K8S_ASSETS.",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        """Start the control plane in the background and return once every node is Ready."""

        def run() -> None:
            from topoq.testbeds.daemons import recorded

            BedShape, bring_up, describe, _ = _bed_functions()
            bed = bring_up(directory, BedShape(nodes, levels), kueue=kueue, assets=assets)
            started = {name: daemon.pid for name, daemon in recorded(bed.directory).items()}
            typer.echo(describe(bed, started))

        guarded(run)

    @k8s_app.command("down")
    def k8s_down(
        directory: Annotated[Path, typer.Argument(help="The directory given to 'up'.")],
    ) -> None:
        """Stop exactly what 'up' started there (by its recorded PIDs)."""

        def run() -> None:
            tear_down = _bed_functions()[3]
            stopped = tear_down(directory)
            typer.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running there")

        guarded(run)

    slurm_app = typer.Typer(
        help="A real Slurm cluster (munged, slurmctld, one slurmd per node with fake GPUs, "
        "topology/tree) on 127.0.0.1.",
        no_args_is_help=True,
    )
    dev_app.add_typer(slurm_app, name="slurm")

    @slurm_app.command("up")
    def slurm_up(
        directory: Annotated[Path, typer.Argument(help="Where its files, logs and PIDs go.")],
        leaves: Annotated[int, typer.Option(help="Leaf switches.")] = 4,
        nodes_per_leaf: Annotated[int, typer.Option(help="Nodes under each leaf switch.")] = 4,
        leaves_per_spine: Annotated[int, typer.Option(help="Leaf switches under a spine.")] = 2,
        gpus: Annotated[int, typer.Option(help="Fake GPUs per node.")] = 8,
    ) -> None:
        """Start the cluster in the background and return once every node is idle (installs
        Debian's Slurm and munge packages first when they are missing)."""

        def run() -> None:
            from topoq.testbeds.daemons import recorded
            from topoq.testbeds.slurm import SlurmShape, bring_up, describe

            shape = SlurmShape(leaves, nodes_per_leaf, leaves_per_spine, gpus)
            bed = bring_up(directory, shape)
            started = {name: daemon.pid for name, daemon in recorded(bed.directory).items()}
            typer.echo(describe(bed, started))

        guarded(run)

    @slurm_app.command("down")
    def slurm_down(
        directory: Annotated[Path, typer.Argument(help="The directory given to 'up'.")],
    ) -> None:
        """Stop exactly what 'up' started there (by its recorded PIDs)."""

        def run() -> None:
            from topoq.testbeds.slurm import tear_down

            stopped = tear_down(directory)
            said = f"stopped {len(stopped)} daemons" if stopped else "nothing was running there"
            typer.echo(said)

        guarded(run)


def _bed_functions() -> tuple[Any, Any, Any, Any]:
    """The bed's functions; without the ``kubernetes`` extra, one line that says so."""
    from topoq.domain.errors import InvalidInputError
    from topoq.executors.kubernetes.plugin import MISSING_CLIENT_HINT

    try:
        from topoq.testbeds.kubernetes import BedShape, bring_up, describe, tear_down
    except ImportError as error:
        raise InvalidInputError(
            f"the test bed needs the kubernetes extra ({error.name} is missing)",
            hint=MISSING_CLIENT_HINT,
        ) from None
    return BedShape, bring_up, describe, tear_down
