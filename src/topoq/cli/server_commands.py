"""The verbs that talk to a running server, through ``topoq.client`` alone."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from datetime import time as dt_time
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from topoq.client import ClientError, TopoqClient, resolve_settings
from topoq.discovery.batch_jobs import is_batch_job
from topoq.discovery.documents import read_document
from topoq.discovery.pod_groups import is_pod_group
from topoq.discovery.training_jobs import is_training_job
from topoq.domain.durations import duration_s, format_duration
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import DependencyKind, DependencyStatus
from topoq.wire.v1 import Explanation, JobFormat, JobSummary, SubmitJobRequest
from topoq.wire.v1.cluster import TopologyDomainModel, TopologyModel
from topoq.wire.v1.jobs import DependencyModel
from topoq.wire.v1.reports import UsageReportModel

EXIT_REJECTED = 2
EXIT_UNREACHABLE = 3
EXIT_UNAUTHORIZED = 4
EXIT_SERVER_ERROR = 1


@contextmanager
def connected(server: str | None, token: str | None) -> Iterator[TopoqClient]:
    """A client for the configured server; API errors end the command with a clear exit code:
    2 rejected (4xx), 3 server unreachable, 4 not allowed (401/403), 1 server error."""
    settings = resolve_settings(server, token)
    client = TopoqClient(settings.server, settings.token)
    try:
        yield client
    except ClientError as error:
        _fail(error)
    finally:
        client.close()


def _fail(error: ClientError) -> NoReturn:
    typer.echo(f"error: {error}", err=True)
    if error.status is None:
        raise typer.Exit(EXIT_UNREACHABLE)
    if error.status in (401, 403):
        raise typer.Exit(EXIT_UNAUTHORIZED)
    raise typer.Exit(EXIT_REJECTED if error.status < 500 else EXIT_SERVER_ERROR)


def print_json(model: Any) -> None:
    if isinstance(model, list):
        print(json.dumps([item.model_dump(mode="json") for item in model], indent=2))
    else:
        print(model.model_dump_json(indent=2))


# --- jobs ---------------------------------------------------------------------------------
def detect_format(document: object, source: str) -> JobFormat:
    if isinstance(document, dict):
        if str(document.get("apiVersion", "")).startswith("topoq.io/"):
            return JobFormat.TOPOQ
        if document.get("kind") == "Workload":
            return JobFormat.KUEUE
        if "job_name" in document:
            return JobFormat.HYPERPOD
        if is_batch_job(document) or is_training_job(document) or is_pod_group(document):
            return JobFormat.KUBERNETES
    raise InvalidInputError(
        "cannot tell the job format",
        where=source,
        hint="give a topoq job file (apiVersion topoq.io/v1), a Kueue Workload, a HyperPod "
        "job (job_name, …), a batch/v1 Job, a HyperPodPyTorchJob, a PyTorchJob, a Pod or a "
        "List of the Pods of one group, or say which with --format",
    )


def submission(
    path: Path,
    form: str | None,
    team: str | None,
    priority: str | None,
    job_id: str | None,
    max_retry: int | None,
    after: Mapping[DependencyKind, Sequence[str]],
    time_limit: str | None = None,
) -> SubmitJobRequest:
    document = read_document(path)
    chosen = JobFormat(form) if form else detect_format(document, str(path))
    return SubmitJobRequest(
        format=chosen,
        document=document,
        team=team,
        priority_class=priority,
        id=job_id,
        max_retry=max_retry,
        dependencies=[
            DependencyModel(kind=kind, job=job) for kind, jobs in after.items() for job in jobs
        ],
        time_limit_s=None if time_limit is None else duration_s(time_limit, where="--time"),
    )


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    span = max(0, int(time.time() - seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if span >= size:
            return f"{span // size}{unit}"
    return f"{span}s"


def waiting_reason(answer: Explanation) -> str:
    """The reason a pending job waits, with the dependencies still open
    (``WAITING_ON_DEPENDENCY: after-ok prep``)."""
    reason = answer.reason or ""
    still_open = [d for d in answer.dependencies if d.status is DependencyStatus.OPEN]
    if not still_open:
        return reason
    return f"{reason}: " + ", ".join(f"{d.kind.value} {d.job}" for d in still_open)


def dependency_lines(answer: Explanation) -> list[str]:
    """One line per dependency: its kind, the upstream job, its phase and where it stands."""
    return [
        f"  {d.kind.value} {d.job}: "
        + (d.phase.value if d.phase is not None else "no such job")
        + f" ({d.status.value})"
        for d in answer.dependencies
    ]


def jobs_table(
    rows: list[JobSummary], reasons: dict[str, str], etas: dict[str, float] | None = None
) -> Table:
    table = Table(box=None, header_style="bold")
    columns = ("JOB", "TEAM", "USER", "PRIORITY", "PHASE", "GPUS", "AGE", "SPAN", "ETA", "REASON")
    for column in columns:
        table.add_column(column, justify="right" if column == "GPUS" else "left")
    for row in rows:
        span = "/".join(str(count) for count in (row.span or {}).values()) or "-"
        table.add_row(
            row.id,
            row.team,
            row.user or "-",
            row.priority_class or "-",
            row.phase.value + (" (held)" if row.held else ""),
            str(row.gpus),
            age(row.submitted_at),
            span,
            eta_text((etas or {}).get(row.id)),
            reasons.get(row.id, ""),
        )
    return table


def eta_text(eta_at: float | None, now: float | None = None) -> str:
    """``in 12m`` for an expected start 12 minutes away, ``now`` when due, ``-`` if unknown."""
    if eta_at is None:
        return "-"
    left = eta_at - (time.time() if now is None else now)
    return f"in {format_duration(left)}" if left >= 1 else "now"


# --- cluster ------------------------------------------------------------------------------
def topology_tree(topology: TopologyModel, depth: int) -> Tree:
    """The server's topology, top level first, down to ``depth`` levels: free and used GPUs
    per domain (free counts schedulable nodes only)."""
    root = Tree(
        f"[bold]{escape(topology.name)}[/]: {topology.gpus_free}/{topology.gpus} GPUs free, "
        f"{topology.gpus_used} used"
    )

    def add(parent: Tree, domain: TopologyDomainModel, level: int) -> None:
        branch = parent.add(
            f"{escape(domain.value)}  [dim]{escape(domain.level.rsplit('/', 1)[-1])}[/]  "
            f"{domain.gpus_free}/{domain.gpus} GPUs free, {domain.gpus_used} used"
            f"  [dim]({domain.nodes} node{'s' if domain.nodes != 1 else ''})[/]"
        )
        if level + 1 < depth:
            for child in domain.children:
                add(branch, child, level + 1)

    for domain in topology.domains:
        add(root, domain, 0)
    return root


def outside_lines(topology: TopologyModel) -> list[str]:
    return [
        f"outside the tree: {node.name} ({node.reason}: {node.detail})" for node in topology.outside
    ]


# --- reports ------------------------------------------------------------------------------
def usage_title(report: UsageReportModel) -> str:
    teams = "every team" if report.teams is None else "team " + ", ".join(report.teams)
    return f"GPU usage of {teams}, {utc_time(report.start)} to {utc_time(report.end)}"


def utc_time(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.strftime("%Y-%m-%d" if moment.time() == dt_time() else "%Y-%m-%d %H:%M UTC")


def usage_table(report: UsageReportModel) -> Table:
    """Per team per UTC day: GPU-hours in guarantee and borrowed, jobs, preemptions."""
    table = Table(box=None, header_style="bold")
    numbers = ("GPU-H IN GUARANTEE", "GPU-H BORROWED", "JOBS", "PREEMPTIONS")
    for column in ("TEAM", "DAY", *numbers):
        table.add_column(column, justify="right" if column in numbers else "left")
    for day in report.days:
        table.add_row(
            escape(day.team),
            day.day.isoformat(),
            f"{day.gpu_hours_in_guarantee:.2f}",
            f"{day.gpu_hours_borrowed:.2f}",
            str(day.jobs),
            str(day.preemptions),
        )
    return table


def job_usage_table(report: UsageReportModel) -> Table:
    """Per job: GPU-hours, borrowed GPU-hours, wall time holding GPUs, attempts."""
    table = Table(box=None, header_style="bold")
    numbers = ("GPU-H", "BORROWED GPU-H", "WALL TIME", "ATTEMPTS")
    for column in ("JOB", "TEAM", *numbers):
        table.add_column(column, justify="right" if column in numbers else "left")
    for job in report.jobs:
        table.add_row(
            escape(job.job),
            escape(job.team),
            f"{job.gpu_hours:.2f}",
            f"{job.gpu_hours_borrowed:.2f}",
            duration(job.wall_time_s),
            str(job.attempts),
        )
    return table


def duration(seconds: float) -> str:
    """``2h05m``, ``7m30s``, ``12s``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def with_client(
    server: str | None, token: str | None, action: Callable[[TopoqClient], None]
) -> None:
    with connected(server, token) as client:
        action(client)
