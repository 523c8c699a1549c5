"""The ``topoq`` command. Heavy modules are imported inside each command, so start-up stays fast
(docs/cli.md, Start-up; ``benchmarks/startup.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from topoq.cli.output import Output, OutputOption, print_as
from topoq.cli.server_app import ServerOption, TokenOption

EXIT_BAD_INPUT = 2

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
"""numpy's OpenBLAS starts a thread per core when it is imported, and their start costs a verb
that places ~0.1 s of CPU; topoq does no linear algebra (placement sums and compares arrays),
so one thread is all it uses. Set here, before any verb imports numpy; a value the user set
stays."""


class QuietPipeGroup(TyperGroup):
    """The ``topoq`` group: a reader that closes standard output early (``topoq place … |
    head``) ends the verb quietly with exit 0, as a Unix filter does, instead of click's
    exit 1. A bad command line is one line on standard error (``cli.errors``)."""

    def make_context(self, *args: Any, **extra: Any) -> Any:
        from topoq.cli.errors import one_line_usage_errors

        with one_line_usage_errors():
            return super().make_context(*args, **extra)

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click Context
        from topoq.cli.errors import one_line_usage_errors

        try:
            with one_line_usage_errors():
                return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(0) from None


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that flushing what is left of it at exit does
    not fail again on the closed pipe."""

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


app = typer.Typer(
    cls=QuietPipeGroup,
    name="topoq",
    help="Topology-aware gang placement and governance for shared GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)
topology_app = typer.Typer(
    help="Read, check, draw and convert cluster topologies.", no_args_is_help=True
)
app.add_typer(topology_app, name="topology")
node_app = typer.Typer(
    help="Mark nodes failed or recovered on a running server.", no_args_is_help=True
)
app.add_typer(node_app, name="node")


class ExportFormat(StrEnum):
    SLURM_TREE = "slurm-tree"
    SLURM_BLOCK = "slurm-block"
    KUEUE = "kueue"
    LABELS = "labels"
    NODELIST = "nodelist"
    CLUSTER = "cluster"


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


@app.command()
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


policy_app = typer.Typer(
    help="Check, show and convert governance policies (teams, quotas, priorities).",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")


class DocumentFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"


DocumentFormatOption = Annotated[DocumentFormat, typer.Option("--format", help="yaml or json.")]


PolicyOption = Annotated[
    Path | None,
    typer.Option("--policy", "-P", help="A topoq policy file (kind: Policy).", show_default=False),
]
HyperPodSchedulerConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--hyperpod-scheduler-config",
        help="The JSON of 'aws sagemaker describe-cluster-scheduler-config'.",
        show_default=False,
    ),
]
HyperPodQuotaOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--hyperpod-quota",
        help="The JSON of 'aws sagemaker describe-compute-quota' (repeat per team) or of "
        "'list-compute-quotas'.",
        show_default=False,
    ),
]


@policy_app.command("lint")
def policy_lint(
    policy: PolicyOption = None,
    hyperpod_scheduler_config: HyperPodSchedulerConfigOption = None,
    hyperpod_quota: HyperPodQuotaOption = None,
    nodes: ClusterOption = None,
    topology: TopologyOption = None,
    instance_type: InstanceTypeOption = None,
    gang: Annotated[
        list[str] | None,
        typer.Option(
            "--gang",
            "-g",
            help="TEAM=FILE: a team's typical gang (any workload file); checks that it can "
            "ever fit the team's quota and the topology. Repeatable.",
            show_default=False,
        ),
    ] = None,
    flavor_label: Annotated[
        str | None,
        typer.Option(
            "--flavor-label",
            help="The node label that names a node's flavor "
            "(default node.kubernetes.io/instance-type).",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Check a policy against the cluster: errors exit 1, warnings are printed."""
    from topoq.cli.policy_commands import run_policy_lint

    def lint(chosen: str) -> None:
        run_policy_lint(
            policy,
            hyperpod_scheduler_config,
            hyperpod_quota or [],
            nodes,
            topology,
            instance_type,
            chosen,
            gang or [],
            flavor_label,
        )

    if output is Output.YAML:
        guarded(lambda: _as_yaml(lambda: lint(Output.JSON.value)))
    else:
        guarded(lambda: lint(output.value))


def _as_yaml(print_json: Callable[[], None]) -> None:
    """What ``print_json`` prints as one JSON document, printed as YAML instead; an exit it
    ends with (``policy lint``'s 1 on errors) comes after the document."""
    import contextlib
    import io
    import json

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            print_json()
    finally:
        if printed.getvalue():
            print_as(Output.YAML, json.loads(printed.getvalue()), None)


@policy_app.command("show")
def policy_show(
    policy: PolicyOption = None,
    hyperpod_scheduler_config: HyperPodSchedulerConfigOption = None,
    hyperpod_quota: HyperPodQuotaOption = None,
    output: Annotated[
        Output,
        typer.Option("--output", "-o", help="table, or the policy file as json or yaml."),
    ] = Output.TABLE,
    version: Annotated[
        int | None,
        typer.Option(
            "--version",
            min=1,
            help="A version the server kept (topoq policy history lists them), instead of a file.",
            show_default=False,
        ),
    ] = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Show a policy: teams, guarantees, borrow and lending limits per flavor (of a file, of
    HyperPod's objects, or of a version the server kept)."""
    from topoq.cli.policy_commands import run_policy_show, show_policy

    if version is None:
        guarded(
            lambda: run_policy_show(
                policy, hyperpod_scheduler_config, hyperpod_quota or [], output.value
            )
        )
        return
    if policy is not None or hyperpod_scheduler_config is not None or hyperpod_quota:
        fail("--version shows a version the server kept: leave out the policy files")
    from topoq.cli.server_commands import connected
    from topoq.discovery.policy import policy_from_document

    with connected(server, token) as client:
        kept = client.policy_version(version)
    spec = policy_from_document(kept.document, source=f"policy version {version}")
    show_policy(spec, output.value)


@policy_app.command("convert")
def policy_convert(
    from_hyperpod: Annotated[
        bool,
        typer.Option(
            "--from-hyperpod",
            help="Convert HyperPod task governance (the only source so far; required).",
        ),
    ] = False,
    hyperpod_scheduler_config: HyperPodSchedulerConfigOption = None,
    hyperpod_quota: HyperPodQuotaOption = None,
    name: Annotated[
        str | None, typer.Option("--name", help="metadata.name of the written policy.")
    ] = None,
    to: DocumentFormatOption = DocumentFormat.YAML,
    out: OutFileOption = None,
) -> None:
    """Convert HyperPod's scheduler config and compute quotas into a topoq policy file."""
    from topoq.cli.policy_commands import run_policy_convert

    if not from_hyperpod:
        fail("say what to convert from: --from-hyperpod (the only source so far)")
    guarded(
        lambda: run_policy_convert(
            hyperpod_scheduler_config, hyperpod_quota or [], out, name, to.value
        )
    )


class PolicyExportFormat(StrEnum):
    KUEUE = "kueue"


@policy_app.command("export")
def policy_export(
    to: Annotated[PolicyExportFormat, typer.Option("--to", help="The system to write for.")],
    policy: PolicyOption = None,
    nodes: Annotated[
        Path | None,
        typer.Option(
            "--nodes",
            "--cluster",
            "-n",
            help="The cluster (any format `topoq place` reads): its topology, and the capacity "
            "no team is guaranteed (the root cohort's quota).",
            show_default=False,
        ),
    ] = None,
    api_version: Annotated[
        str, typer.Option("--api-version", help="v1beta2 (Kueue 0.15+), or v1beta1.")
    ] = "v1beta2",
    namespace_pattern: Annotated[
        str, typer.Option(help="Each team's namespace for its LocalQueue ({team}: its name).")
    ] = "{team}",
    out: OutFileOption = None,
    server: Annotated[
        str | None, typer.Option(help="Without --policy: the server whose policy is in force.")
    ] = None,
    token: Annotated[str | None, typer.Option(help="The server's token.")] = None,
) -> None:
    """Write the policy as the Kueue objects that govern the same way: ResourceFlavors, the
    Topology, the Cohort tree, a ClusterQueue and LocalQueue per team, WorkloadPriorityClasses
    (`kubectl apply --server-side -f` takes them)."""
    from topoq.cli.policy_commands import run_policy_export_kueue

    guarded(
        lambda: run_policy_export_kueue(
            policy, nodes, api_version, namespace_pattern, out, server, token
        )
    )


class PolicyImportSource(StrEnum):
    KUEUE = "kueue"


@policy_app.command("import")
def policy_import(
    source: Annotated[PolicyImportSource, typer.Option("--from", help="The system to read.")],
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Files of Kueue objects (YAML, several documents, or a List).", show_default=False
        ),
    ] = None,
    live: Annotated[
        bool, typer.Option("--live", help="Read the objects from the cluster (see --kubeconfig).")
    ] = False,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="The cluster to read (default: KUBECONFIG, ~/.kube/config).", show_default=False
        ),
    ] = None,
    to: DocumentFormatOption = DocumentFormat.YAML,
    out: OutFileOption = None,
) -> None:
    """Read Kueue's ClusterQueues, Cohorts, ResourceFlavors and WorkloadPriorityClasses as a
    topoq policy file (what `policy export --to kueue` wrote reads back the same)."""
    from topoq.cli.policy_commands import run_policy_import_kueue

    guarded(lambda: run_policy_import_kueue(files or [], kubeconfig, live, out, to.value))


class SimulateOutput(StrEnum):
    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"


@app.command()
def simulate(
    scenario: Annotated[
        Path, typer.Argument(help="A scenario file (kind: Scenario): cluster, policy and events.")
    ],
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            help="Also write the decision log (JSON lines) to this file.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        SimulateOutput,
        typer.Option(
            "--output",
            "-o",
            help="table (summary per team), json (summary) or jsonl (the decision log).",
        ),
    ] = SimulateOutput.TABLE,
) -> None:
    """Run a scenario through the scheduler on a virtual clock: the decisions and a summary per
    team (GPU-hours in guarantee and borrowed, waits, preemptions)."""
    from topoq.cli.simulate_command import run_simulate

    guarded(lambda: run_simulate(scenario, log, output.value))


@app.command()
def demo(
    quick: Annotated[
        bool, typer.Option("--quick", help="The same story with short sleeps (for CI): ≤ 30 s.")
    ] = False,
    keep_running: Annotated[
        bool,
        typer.Option("--keep-running", help="Leave the server up at the end, until Ctrl-C."),
    ] = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", help="No server: place a few jobs on the example cluster and say why."
        ),
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="A new or empty directory for the store, token and logs (kept).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="The server's port (default: a free one).", show_default=False
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            help="local (each pod a process here) or kubernetes (each pod a Pod: on "
            "--kubeconfig's cluster, else on a 64-node test bed brought up from "
            "TOPOQ_K8S_ASSETS)."
        ),
    ] = "local",
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="With --executor kubernetes: the cluster to play on (64 nodes of 8 GPUs "
            "under 2 spines × 4 blocks, as the demo cluster).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start a server on a 512-GPU virtual cluster with three teams and real pods, and play a
    story: borrowing, reclaim, priority preemption, a gang waiting for a block, a node failure."""
    if offline:
        from topoq.cli.demo import run_offline_demo

        guarded(run_offline_demo)
        return
    from topoq.cli.demo import DemoOptions, run_demo

    codes: list[int] = []
    options = DemoOptions(
        quick,
        keep_running,
        data_dir,
        port,
        executor,
        kubeconfig.resolve() if kubeconfig is not None else None,
    )
    guarded(lambda: codes.append(run_demo(options)))
    raise typer.Exit(codes[0] if codes else EXIT_BAD_INPUT)


@app.command()
def version(output: OutputOption = Output.TABLE) -> None:
    """Print topoq's version (-o json: {"version": …})."""
    from topoq import __version__

    print_as(output, {"version": __version__}, lambda: __version__)


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


def _register_server_verbs() -> None:
    from topoq.cli import access_app, cluster_app, dev_app, policy_versions_app, report_app
    from topoq.cli.server_app import register

    register(app, node_app, policy_app)
    policy_versions_app.register(policy_app)
    access_app.register(app)
    cluster_app.register(app)
    report_app.register(app, topology_app)
    dev_app.register(app)


_register_server_verbs()


def main() -> None:
    from topoq.domain.errors import TopoqError

    try:
        app()
    except SystemExit as done:
        _flush_stdout()
        raise done from None
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        sys.exit(130)
    except TopoqError as error:  # one a verb did not catch itself: still one line
        typer.echo(f"error: {one_line(str(error))}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except OSError as error:  # a file named on the command line that cannot be read or written
        from topoq.cli.errors import os_error_line

        typer.echo(f"error: {os_error_line(error)}", err=True)
        sys.exit(EXIT_BAD_INPUT)


def _flush_stdout() -> None:
    """Write what is left of standard output now; a reader gone already (``| head``) is
    no error: the rest goes to /dev/null."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
