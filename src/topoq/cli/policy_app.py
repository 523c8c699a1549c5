"""The policy verbs: ``topoq policy lint|show|convert|export|import`` read files offline;
``topoq policy apply|current|history|diff|rollback`` speak to a running server."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from topoq.cli.common import (
    ClusterOption,
    InstanceTypeOption,
    OutFileOption,
    ServerOption,
    TokenOption,
    TopologyOption,
    fail,
    guarded,
)
from topoq.cli.output import Output, OutputOption, print_as

policy_app = typer.Typer(
    help="Check, show and convert governance policies (teams, quotas, priorities).",
    no_args_is_help=True,
)


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


def register(app: typer.Typer) -> None:
    """Add ``policy`` to the CLI."""
    from topoq.cli import policy_versions_app

    app.add_typer(policy_app, name="policy")
    policy_versions_app.register(policy_app)

    @policy_app.command("apply")
    def policy_apply(
        file: Annotated[Path, typer.Argument(help="A topoq policy file (kind: Policy).")],
        server: ServerOption = None,
        token: TokenOption = None,
        output: OutputOption = Output.TABLE,
    ) -> None:
        """Make a policy file the server's policy (a new version; admins only); prints the
        version and the lint's warnings (-o json|yaml: the policy as the API answered)."""
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
            from topoq.cli.policy_commands import show_policy
            from topoq.discovery.policy import policy_from_document

            source = f"policy version {current.version}"
            guarded(
                lambda: show_policy(policy_from_document(current.document, source=source), "table")
            )
