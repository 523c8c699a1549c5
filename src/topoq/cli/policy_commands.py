"""The ``topoq policy`` commands: lint a policy against a cluster, show it, convert HyperPod's.

A policy comes from topoq's policy file (``--policy``) or from the JSON of HyperPod's
``describe-cluster-scheduler-config`` and ``describe-compute-quota`` (``--hyperpod-...``).
Bad input raises :class:`InvalidInputError` (the app's guard exits 2); lint errors exit 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console

from topoq.cli.commands import warn_about
from topoq.cli.console import emit, make_console
from topoq.cli.output import table_of
from topoq.core.policy_lint import lint_policy
from topoq.discovery.jobfile import load_workload
from topoq.discovery.policy import load_policy, policy_document
from topoq.discovery.policy_hyperpod import load_hyperpod_policy
from topoq.discovery.sources import LoadedCluster, load_cluster
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import (
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorQuota,
    IdleAllocation,
    QueueOrder,
    TeamName,
    TeamSpec,
)
from topoq.domain.lint import LintFinding, accelerators_first, readable_amount
from topoq.domain.names import check_label_name
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.domain.quantity import EFA, NEURON_DEVICE, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec

EXIT_LINT_ERRORS = 1
_SHORT_NAMES = {NVIDIA_GPU: "GPU", NEURON_DEVICE: "Neuron", EFA: "EFA"}


def load_policy_input(
    policy: Path | None, hyperpod_scheduler_config: Path | None, hyperpod_quotas: Sequence[Path]
) -> ClusterPolicy:
    """The policy from topoq's file, or from HyperPod's JSON — exactly one of them."""
    hyperpod = hyperpod_scheduler_config is not None or bool(hyperpod_quotas)
    if policy is not None and hyperpod:
        raise InvalidInputError(
            "both --policy and HyperPod files are given",
            hint="give a topoq policy file, or the HyperPod JSON, not both",
        )
    if policy is not None:
        return load_policy(policy)
    if not hyperpod:
        raise InvalidInputError(
            "no policy given",
            hint="give --policy FILE, or --hyperpod-scheduler-config and --hyperpod-quota FILEs",
        )
    return load_hyperpod_policy(hyperpod_scheduler_config, hyperpod_quotas)


def run_policy_lint(
    policy: Path | None,
    hyperpod_scheduler_config: Path | None,
    hyperpod_quotas: list[Path],
    nodes: Path | None,
    topology: Path | None,
    instance_type: str | None,
    output: str,
    typical_gangs: list[str] | None = None,
    flavor_label: str | None = None,
) -> None:
    """Print the findings; exit 1 when any is an error."""
    spec = load_policy_input(policy, hyperpod_scheduler_config, hyperpod_quotas)
    cluster = load_cluster(nodes, topology=topology, slurm_instance_type=instance_type)
    gangs = typical_gang_files(typical_gangs or [])
    findings = lint_policy(
        spec,
        cluster.nodes,
        cluster.topology,
        typical_gangs=gangs,
        flavor_label=flavor_label or INSTANCE_TYPE_LABEL,
    )
    warn_about(cluster, example=nodes is None)
    if output == "json":
        print(json.dumps(lint_document(findings), indent=2))
    else:
        print_findings(make_console(), findings, spec, cluster)
    if any(finding.is_error for finding in findings):
        raise typer.Exit(EXIT_LINT_ERRORS)


def typical_gang_files(entries: Sequence[str]) -> dict[TeamName, WorkloadSpec]:
    """``TEAM=FILE`` pairs → each team's typical gang, read as any workload file."""
    gangs: dict[TeamName, WorkloadSpec] = {}
    for entry in entries:
        team, separator, path = entry.partition("=")
        if not separator or not team or not path:
            raise InvalidInputError(
                f"cannot read {entry!r}",
                where="--gang",
                hint="write TEAM=FILE, e.g. --gang nlp=examples/workloads/required-block.yaml",
            )
        check_label_name(team, what="team name", where="--gang")
        if TeamName(team) in gangs:
            raise InvalidInputError(
                f"team {team!r} has two typical gangs", where="--gang", hint="give one per team"
            )
        gangs[TeamName(team)] = load_workload(Path(path))
    return gangs


def lint_document(findings: Sequence[LintFinding]) -> dict[str, Any]:
    return {
        "valid": not any(finding.is_error for finding in findings),
        "errors": sum(finding.is_error for finding in findings),
        "warnings": sum(not finding.is_error for finding in findings),
        "findings": [
            {
                "severity": finding.severity.value,
                "code": finding.code.value,
                "message": finding.message,
                "hint": finding.hint,
            }
            for finding in findings
        ],
    }


def print_findings(
    console: Console,
    findings: Sequence[LintFinding],
    policy: ClusterPolicy,
    cluster: LoadedCluster,
) -> None:
    for finding in findings:
        colour = "red" if finding.is_error else "yellow"
        console.print(f"[{colour}]{finding.severity.value}[/] [bold]{finding.code.value}[/]")
        console.print(f"  {finding.message}", markup=False)
        console.print(f"  [dim]fix:[/] {finding.hint}")
    errors = sum(finding.is_error for finding in findings)
    warnings = len(findings) - errors
    scope = f"{len(policy.teams)} teams on {len(cluster.nodes)} nodes"
    if not findings:
        console.print(f"[green]the policy is clean[/]: {scope}")
    else:
        console.print(f"{_count(errors, 'error')}, {_count(warnings, 'warning')} ({scope})")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def run_policy_show(
    policy: Path | None,
    hyperpod_scheduler_config: Path | None,
    hyperpod_quotas: list[Path],
    output: str,
) -> None:
    """The policy as tables (``table``), or as topoq's policy file (``json``, ``yaml``)."""
    spec = load_policy_input(policy, hyperpod_scheduler_config, hyperpod_quotas)
    show_policy(spec, output, name=policy.stem if policy is not None else None)


def show_policy(spec: ClusterPolicy, output: str, *, name: str | None = None) -> None:
    if output == "json":
        print(json.dumps(policy_document(spec, name=name), indent=2))
    elif output == "yaml":
        print(yaml_text(policy_document(spec, name=name), sort_keys=False), end="")
    else:
        print_policy(make_console(), spec)


def run_policy_convert(
    hyperpod_scheduler_config: Path | None,
    hyperpod_quotas: list[Path],
    out: Path | None,
    name: str | None = None,
    output: str = "yaml",
) -> None:
    """HyperPod's JSON → topoq's policy file (YAML, or JSON), to ``out`` or standard output."""
    if hyperpod_scheduler_config is None and not hyperpod_quotas:
        raise InvalidInputError(
            "no HyperPod files given",
            hint="give --hyperpod-scheduler-config FILE and one --hyperpod-quota FILE per team",
        )
    spec = load_hyperpod_policy(hyperpod_scheduler_config, hyperpod_quotas)
    write_policy(spec, name, output, out)


def write_policy(policy: ClusterPolicy, name: str | None, output: str, out: Path | None) -> None:
    """``policy`` as a policy file (YAML, or JSON), to ``out`` or standard output."""
    document = policy_document(policy, name=name)
    text = (
        json.dumps(document, indent=2) + "\n"
        if output == "json"
        else yaml_text(document, sort_keys=False)
    )
    emit(text, out)


def yaml_text(document: Any, *, sort_keys: bool = False) -> str:
    """A document as YAML, by PyYAML's C emitter when it is installed (a policy at the team
    limit takes a third of a second in the pure-Python one)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(document, Dumper=dumper, sort_keys=sort_keys)


def print_policy(console: Console, policy: ClusterPolicy) -> None:
    classes = ", ".join(f"{cls.name} ({cls.weight})" for cls in policy.priority_classes)
    default = f"; default {policy.default_priority_class}" if policy.default_priority_class else ""
    console.print(f"prioritization: {policy.prioritization.value}")
    if policy.queue_order is not QueueOrder.SUBMISSION:
        console.print(f"within a priority: {policy.queue_order.value}")
    console.print(f"priority classes: {classes or 'none'}{default}", markup=False)
    console.print(f"idle capacity: {policy.idle_allocation.value}", end="")
    console.print(
        "; capacity no team owns is borrowable"
        if policy.idle_resource_sharing
        else "; capacity no team owns is not lent"
    )
    if policy.idle_allocation is IdleAllocation.FAIR_SHARE:
        half_life = policy.fair_share_usage_half_life_s
        history = f"usage halves in {half_life:g} s" if half_life else "none (half-life 0)"
        console.print(f"fair-share usage history: {history}")
    headers = ("team", "sharing", "weight", "flavor", "guarantee", "borrow limit", "lends")
    rows = [row for team in policy.teams for row in _team_rows(team)]
    console.file.write(table_of(headers, rows) + "\n")
    if policy.cohorts:
        titles = ("cohort", "weight", "flavor", "guarantee", "takes in", "lends out")
        lines = [row for cohort in policy.cohorts for row in _cohort_rows(cohort)]
        console.file.write("\n" + table_of(titles, lines) + "\n")


def _cohort_rows(cohort: CohortSpec) -> Iterator[tuple[str, ...]]:
    """A declared cohort's own guarantee and its subtree's limits ("no limit" when none)."""
    quotas: Sequence[CohortQuota | None] = cohort.quotas or [None]
    for index, quota in enumerate(quotas):
        first = index == 0
        yield (
            "/".join(cohort.path) if first else "",
            str(cohort.fair_share_weight) if first else "",
            str(quota.flavor) if quota else "-",
            _amounts(quota.guarantee) if quota else "-",
            _amounts(quota.borrow_limit) if quota and quota.borrow_limited else "no limit",
            _amounts(quota.lending_limit) if quota and quota.lend_limited else "no limit",
        )


def _team_rows(team: TeamSpec) -> Iterator[tuple[str, ...]]:
    title = "/".join((*team.cohort, team.name)) + ("" if team.active else " (inactive)")
    sharing = f"{team.sharing.value}\npreempt: {team.preempt_team_tasks.value}\n{team.queueing}"
    quotas: Sequence[FlavorQuota | None] = team.quotas or [None]
    for index, quota in enumerate(quotas):
        first = index == 0
        yield (
            title if first else "",
            sharing if first else "",
            str(team.fair_share_weight) if first else "",
            str(quota.flavor) if quota else "-",
            _amounts(quota.guarantee) if quota else "-",
            _amounts(quota.borrow_limit) if quota and team.sharing.borrows else "-",
            _lends(team, quota),
        )


def _lends(team: TeamSpec, quota: FlavorQuota | None) -> str:
    if quota is None or not team.sharing.lends:
        return "no"
    return "all unused" if quota.lending_limit is None else _amounts(quota.lending_limit)


def _amounts(resources: Resources) -> str:
    """One resource a line, with the short names a table has room for."""
    lines = []
    for name in accelerators_first(resources):
        short = _SHORT_NAMES.get(name)
        lines.append(
            f"{resources[name]} {short}" if short else readable_amount(name, resources[name])
        )
    return "\n".join(lines) or "0"


def run_policy_export_kueue(
    policy_file: Path | None,
    nodes: Path | None,
    api_version: str,
    namespace_pattern: str,
    out: Path | None,
    server: str | None,
    token: str | None,
) -> None:
    """The policy (the file's, else the server's) as Kueue objects, one YAML document each."""
    from topoq.discovery.kueue_policy import cluster_figures, kueue_objects
    from topoq.discovery.sources import load_cluster

    if policy_file is not None:
        policy = load_policy(policy_file)
    else:
        from topoq.cli.server_commands import connected
        from topoq.discovery.policy import policy_from_document

        with connected(server, token) as client:
            policy = policy_from_document(client.policy().document, source="the server's policy")
    cluster = load_cluster(nodes) if nodes is not None else None
    idle, label_values = cluster_figures(policy, cluster.nodes) if cluster else (None, {})
    topology = cluster.topology if cluster is not None else load_cluster(None).topology
    objects = kueue_objects(
        policy,
        topology,
        idle=idle,
        namespace_pattern=namespace_pattern,
        version=api_version,
        label_values=label_values,
    )
    text = yaml.safe_dump_all(objects, sort_keys=False)
    emit(text, out)


def run_policy_import_kueue(
    files: Sequence[Path], kubeconfig: Path | None, live: bool, out: Path | None, form: str
) -> None:
    """A topoq policy file from Kueue's objects: files (YAML, several documents or a List),
    or the live cluster of ``kubeconfig``."""
    from topoq.discovery.documents import documents_in_text, read_text_file
    from topoq.discovery.kueue_policy_import import policy_from_kueue

    objects: list[Any] = []
    for file in files:
        for document in documents_in_text(read_text_file(file), source=str(file)):
            if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
                objects += list(document.get("items") or ())
            else:
                objects.append(document)
    if live or kubeconfig is not None:
        objects += _live_kueue_objects(kubeconfig)
    if not files and not (live or kubeconfig is not None):
        raise InvalidInputError(
            "nothing to read", hint="give Kueue object files, or --live (with --kubeconfig)"
        )
    write_policy(policy_from_kueue(objects), "from-kueue", form, out)


def _live_kueue_objects(kubeconfig: Path | None) -> list[Any]:
    from topoq.executors.kubernetes.plugin import MISSING_CLIENT_HINT

    try:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        from topoq.executors.kubernetes.client import client_from_kubeconfig
    except ImportError:
        raise InvalidInputError(
            "reading a live cluster needs the official Kubernetes client", hint=MISSING_CLIENT_HINT
        ) from None
    custom: Any = client.CustomObjectsApi(client_from_kubeconfig(kubeconfig))
    objects: list[Any] = []
    for plural in ("resourceflavors", "cohorts", "clusterqueues", "workloadpriorityclasses"):
        try:
            listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural)
        except ApiException as error:
            raise InvalidInputError(
                f"cannot list Kueue {plural}: {error.status} {error.reason}",
                hint="is Kueue installed, and may this user list its objects?",
            ) from None
        except Exception as error:  # the API server unreachable
            raise InvalidInputError(f"cannot reach the cluster: {error}") from None
        objects += listed.get("items") or []
    return objects
