"""The verbs that talk to a running server, through ``topoq.client`` alone."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from datetime import time as dt_time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from topoq.cli.output import counted, readable_quantity, table_of, utc
from topoq.client import ClientError, TopoqClient, resolve_settings
from topoq.domain.durations import duration_s, format_duration
from topoq.domain.errors import InvalidInputError, TopoqError
from topoq.domain.gpu_share import GPU_SHARE, gpus_text
from topoq.domain.phases import DependencyKind
from topoq.domain.quantity import NVIDIA_GPU, quantity_value

if TYPE_CHECKING:  # a verb loads the wire models of the answers it reads, when it reads them
    from rich.table import Table
    from rich.tree import Tree

    from topoq.wire.v1 import (
        Explanation,
        JobDetail,
        JobFormat,
        JobSummary,
        QueueEntry,
        SubmitJobRequest,
    )
    from topoq.wire.v1.base import ResourceAmounts
    from topoq.wire.v1.cluster import (
        EventModel,
        NodeAction,
        NodeModel,
        TeamModel,
        TopologyDomainModel,
        TopologyModel,
    )
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
    typer.echo(f"error: {in_cli_terms(str(error))}", err=True)
    if error.status is None:
        raise typer.Exit(EXIT_UNREACHABLE)
    if error.status in (401, 403):
        raise typer.Exit(EXIT_UNAUTHORIZED)
    raise typer.Exit(EXIT_REJECTED if error.status < 500 else EXIT_SERVER_ERROR)


CLI_TERMS = (
    ("list jobs with GET /jobs", "topoq list shows the jobs"),
    ("list nodes with GET /nodes", "topoq nodes lists them"),
    ("(PUT /api/v1/policy)", "(topoq policy apply FILE)"),
    (
        "send `Authorization: Bearer <token>`",
        "give --token, TOPOQ_TOKEN or TOPOQ_TOKEN_FILE",
    ),
)
"""The server's hints that name its HTTP routes, and what a CLI user types instead."""


def in_cli_terms(message: str) -> str:
    """A server's message with the HTTP routes it names as the CLI verbs that do the same."""
    for route, verb in CLI_TERMS:
        message = message.replace(route, verb)
    return message


# --- jobs ---------------------------------------------------------------------------------
def detect_format(document: object, source: str) -> JobFormat:
    from topoq.discovery.batch_jobs import is_batch_job  # the readers: for submit alone
    from topoq.discovery.pod_groups import is_pod_group
    from topoq.discovery.training_jobs import is_training_job
    from topoq.wire.v1.jobs import JobFormat

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


def job_format(name: str) -> JobFormat:
    """The ``--format`` a user named; one they mistyped is bad input that lists the choices."""
    from topoq.wire.v1.jobs import JobFormat

    try:
        return JobFormat(name.strip().lower())
    except ValueError:
        choices = ", ".join(kind.value for kind in JobFormat)
        raise InvalidInputError(
            f"unknown job format {name!r}", where="--format", hint=f"one of {choices}"
        ) from None


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
    from topoq.discovery.documents import read_document
    from topoq.wire.v1.jobs import DependencyModel, SubmitJobRequest

    named = job_format(form) if form else None
    document = read_document(path)
    chosen = named or detect_format(document, str(path))
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


def waiting_reason(row: JobSummary) -> str:
    """The reason a pending job waits, with the dependencies still open
    (``WAITING_ON_DEPENDENCY: after-ok prep``), as the job list answered them."""
    reason = row.reason or ""
    if not row.waiting_on:
        return reason
    return f"{reason}: " + ", ".join(f"{d.kind.value} {d.job}" for d in row.waiting_on)


def dependency_lines(answer: Explanation) -> list[str]:
    """One line per dependency: its kind, the upstream job, its phase and where it stands."""
    return [
        f"  {d.kind.value} {d.job}: "
        + (d.phase.value if d.phase is not None else "no such job")
        + f" ({d.status.value})"
        for d in answer.dependencies
    ]


JOB_COLUMNS = ("JOB", "TEAM", "USER", "PRIORITY", "PHASE", "GPUS", "AGE", "SPAN", "ETA", "REASON")


def jobs_table(rows: list[JobSummary]) -> str:
    """The job list as ``topoq list`` prints it, in plain aligned columns (as squeue and
    kubectl do: one line per job, whatever the terminal's width); a pending job's reason and
    ETA are the ones the list answered with (``JobSummary.reason``, ``waitingOn``,
    ``etaAt``)."""
    return table_of(
        JOB_COLUMNS,
        [
            (
                row.id,
                row.team,
                row.user or "-",
                row.priority_class or "-",
                row.phase.value + (" (held)" if row.held else ""),
                str(row.gpus),
                age(row.submitted_at),
                "/".join(str(count) for count in (row.span or {}).values()) or "-",
                eta_text(row.eta_at),
                waiting_reason(row),
            )
            for row in rows
        ],
    )


QUEUE_COLUMNS = ("#", "JOB", "TEAM", "PRIORITY", "GPUS", "TOPOLOGY", "AGE", "ETA", "REASON")


def queue_table(rows: list[QueueEntry]) -> str:
    """The queue as ``topoq queue`` prints it: turn, then the job; ``-`` for a job not in line
    (held, or waiting on another job); another team's job shows its id, team, GPUs and turn."""
    return table_of(
        QUEUE_COLUMNS,
        [
            (
                "-" if row.position is None else str(row.position),
                row.id + (" (held)" if row.held else ""),
                row.team,
                row.priority_class or "-",
                str(row.gpus),
                row.topology or "-",
                age(row.submitted_at),
                eta_text(row.eta_at),
                waiting_reason(row) or ("-" if row.visible else "(another team's job)"),
            )
            for row in rows
        ],
    )


def readable_amounts(amounts: ResourceAmounts) -> str:
    """``nvidia.com/gpu 16, memory 1.5Ti``: resource amounts for people; shares of a GPU
    (``topoq.io/gpu-milli``) are counted into the GPUs (``nvidia.com/gpu 1.5``)."""
    shown = dict(amounts)
    share = shown.pop(GPU_SHARE, None)
    if share is not None:
        whole = shown.get(NVIDIA_GPU, "0")
        try:
            gpus = gpus_text(int(quantity_value(whole)), int(quantity_value(share)))
        except (TopoqError, ValueError):
            shown[GPU_SHARE] = share
        else:
            shown = {NVIDIA_GPU: gpus} | {k: v for k, v in shown.items() if k != NVIDIA_GPU}
    return ", ".join(f"{name} {readable_quantity(name, text)}" for name, text in shown.items())


def job_table(job: JobDetail) -> str:
    """One job as FIELD/VALUE rows, then its history, oldest first."""
    rows = [
        ("job", job.id),
        ("team", job.team),
        ("user", job.user or "-"),
        ("priority", job.priority_class or "-"),
        ("phase", job.phase.value + (" (held)" if job.held else "")),
        ("gpus", str(job.gpus)),
        ("pods", "-" if job.pods is None else str(job.pods)),
        ("submitted", utc(job.submitted_at)),
        ("admitted", utc(job.admitted_at)),
        ("started", utc(job.started_at)),
        ("time limit", "-" if job.time_limit_s is None else format_duration(job.time_limit_s)),
        ("retries", f"{job.failures} of {job.max_retry} used"),
        ("preemptions", str(job.preemptions)),
        ("depends on", ", ".join(f"{d.kind.value} {d.job}" for d in job.dependencies) or "-"),
    ]
    if job.eta_at is not None:
        rows.append(("expected to start", eta_text(job.eta_at)))
    if job.allocation is not None:
        rows.append(("nodes", ", ".join(job.allocation.nodes) or "-"))
        rows.append(("span", span_text(job.allocation.span, job.allocation.best_span)))
        rows.extend(
            (f"usage on {flavor}", readable_amounts(amounts))
            for flavor, amounts in job.allocation.usage.items()
        )
        rows.extend(
            (f"borrowed on {flavor}", readable_amounts(amounts))
            for flavor, amounts in job.allocation.borrowed.items()
            if amounts
        )
    history = [(utc(change.at), change.phase.value, change.cause) for change in job.history]
    return (
        table_of(("FIELD", "VALUE"), rows) + "\n\n" + table_of(("TIME", "PHASE", "CAUSE"), history)
    )


def span_text(span: Mapping[str, int], best: Mapping[str, int]) -> str:
    """``1 network-node-layer-1, 2 network-node-layer-2, 16 hostname (fewest possible: 1,
    1, 16)``: the domains the gang uses per level, and beside them the fewest the free
    capacity allowed when it was placed, when that is recorded."""
    used = ", ".join(f"{count} {label.rsplit('/', 1)[-1]}" for label, count in span.items())
    if not best:
        return used or "-"
    fewest = ", ".join(str(best.get(label, "-")) for label in span)
    verdict = (
        "as tight as it could be"
        if all(count <= best.get(label, count) for label, count in span.items())
        else f"fewest possible: {fewest}"
    )
    return f"{used} ({verdict})"


def explanation_lines(answer: Explanation) -> list[str]:
    """Why a job waits, with the numbers, what would change it, its dependencies and the fair
    share standing, as lines."""
    lines = [
        f"{answer.job}: {answer.phase.value}" + (f" — {answer.reason}" if answer.reason else ""),
        f"  {answer.message}",
    ]
    if answer.eta_at is not None:
        lines.append(f"  expected to start: {eta_text(answer.eta_at)}")
    if answer.numbers:
        lines.append("  numbers: " + ", ".join(f"{k} {v}" for k, v in answer.numbers.items()))
    lines.extend(f"  would change it: {remedy}" for remedy in answer.remedies)
    if answer.dependencies:
        lines.append("depends on:")
        lines.extend(dependency_lines(answer))
    if answer.fair_share:
        lines.append("  fair share (the lowest position is served first):")
    for row in answer.fair_share:
        place = "last (weight 0)" if row.position is None else f"{row.position:.3f}"
        lines.append(
            f"    {row.team}: weight {row.weight}, borrows {row.borrowed_share:.1%} "
            f"now, usage {row.usage:.1%}, position {place}"
        )
    return lines


def eta_text(eta_at: float | None, now: float | None = None) -> str:
    """``in 12m`` for an expected start 12 minutes away, ``now`` when due, ``-`` if unknown."""
    if eta_at is None:
        return "-"
    left = eta_at - (time.time() if now is None else now)
    return f"in {format_duration(left)}" if left >= 1 else "now"


# --- cluster ------------------------------------------------------------------------------
FAILED, CORDONED, READY = "failed", "cordoned", "ready"
STATE_LEGEND = (
    "failed: not ready (marked failed, or its node stopped answering); its work was requeued. "
    "cordoned: takes no new work (drain is cordon and requeue its gangs)."
)


def node_state(node: NodeModel) -> str:
    """``failed`` when not ready, else ``cordoned`` when cordoned, else ``ready``."""
    if not node.ready:
        return FAILED
    return CORDONED if node.cordoned else READY


def nodes_table(found: list[NodeModel]) -> str:
    """Per node: its state, GPUs in use, CPUs and memory, and the jobs on it."""
    return table_of(
        ("NODE", "STATE", "GPUS USED", "CPU", "MEMORY", "JOBS"),
        [
            (
                node.name,
                node_state(node),
                f"{node.gpus_used}/{node.gpus}",
                node.allocatable.get("cpu", "-"),
                readable_quantity("memory", node.allocatable.get("memory", "-")),
                ", ".join(node.jobs) or "-",
            )
            for node in found
        ],
    )


def node_action_line(verb: str, result: NodeAction) -> str:
    """What a node action did: ``cordoned p5-0: ready, cordoned; requeued 1 job: a``."""
    node = result.node
    done = {"cordon": "cordoned", "uncordon": "uncordoned", "drain": "drained"}
    done |= {"fail": "marked failed", "recover": "marked recovered"}
    schedulable = "cordoned" if node.cordoned else "schedulable"
    line = f"{done[verb]} {node.name}: {'ready' if node.ready else 'failed'}, {schedulable}"
    if result.requeued:
        line += f"; requeued {counted(len(result.requeued), 'job')}: {', '.join(result.requeued)}"
    return line


def teams_table(found: list[TeamModel]) -> str:
    """Per team and flavor: GPUs guaranteed, used, borrowed and lent, and its jobs by phase."""
    rows = []
    for team in found:
        jobs = ", ".join(f"{count} {phase.value}" for phase, count in team.jobs.items()) or "-"
        rows += [
            (
                team.name,
                flavor.flavor,
                str(flavor.guarantee_gpus),
                str(flavor.used_gpus),
                str(flavor.borrowed_gpus),
                str(flavor.lent_gpus),
                jobs,
            )
            for flavor in team.flavors
        ]
    return table_of(("TEAM", "FLAVOR", "GUARANTEE", "USED", "BORROWED", "LENT", "JOBS"), rows)


def events_table(found: list[EventModel]) -> str:
    """Job phase changes, newest first: when (and how long ago), job, team, phase, cause."""
    rows = [
        (age(event.at), utc(event.at), event.job, event.team, event.phase.value, event.cause)
        for event in found
    ]
    return table_of(("AGE", "TIME", "JOB", "TEAM", "PHASE", "CAUSE"), rows)


def node_states(topology: TopologyModel, found: list[NodeModel]) -> dict[str, list[str]]:
    """Domain name (``spine-1/block-2/p5-0``, as the topology names its domains) → the states
    of its nodes that are not ready or cordoned."""
    marked: dict[str, list[str]] = {}
    for node in found:
        state = node_state(node)
        if state == READY or not all(level in node.labels for level in topology.levels):
            continue
        values = [node.labels[level] for level in topology.levels]
        for depth in range(1, len(values) + 1):
            marked.setdefault("/".join(values[:depth]), []).append(state)
    return marked


def _marks(states: list[str], *, leaf: bool) -> str:
    """``FAILED`` on a node's own line; ``(1 failed, 2 cordoned)`` on a domain's."""
    if not states:
        return ""
    if leaf:
        return f"  [bold red]{states[0].upper()}[/]"
    parts = [f"{states.count(state)} {state}" for state in (FAILED, CORDONED) if state in states]
    return f"  [red]({', '.join(parts)})[/]"


def topology_tree(
    topology: TopologyModel, depth: int, marked: dict[str, list[str]] | None = None
) -> Tree:
    """The server's topology, top level first, down to ``depth`` levels: free and used GPUs
    per domain (free counts schedulable nodes only), failed and cordoned nodes marked."""
    from rich.markup import escape
    from rich.tree import Tree

    marked = marked or {}
    root = Tree(
        f"[bold]{escape(topology.name)}[/]: {topology.gpus_free}/{topology.gpus} GPUs free, "
        f"{topology.gpus_used} used"
    )

    def add(parent: Tree, domain: TopologyDomainModel, level: int) -> None:
        leaf = not domain.children
        branch = parent.add(
            f"{escape(domain.value)}  [dim]{escape(domain.level.rsplit('/', 1)[-1])}[/]  "
            f"{domain.gpus_free}/{domain.gpus} GPUs free, {domain.gpus_used} used"
            + f"  [dim]({counted(domain.nodes, 'node')})[/]"
            + _marks(marked.get(domain.name, []), leaf=leaf)
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
    from rich.markup import escape
    from rich.table import Table

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
    from rich.markup import escape
    from rich.table import Table

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
