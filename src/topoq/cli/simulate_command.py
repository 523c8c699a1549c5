"""``topoq simulate``: run a scenario, print the summary per team, write the decision log."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rich import box
from rich.console import Console
from rich.table import Table

from topoq.cli.console import make_console
from topoq.domain.errors import InvalidInputError
from topoq.sim import LeftPending, SimulationResult, TeamSummary, json_lines, load_scenario
from topoq.sim.compare import SUMMARY_COLUMNS, PolicyFigures, Spread, summary_cells
from topoq.sim.scenario import Scenario

if TYPE_CHECKING:
    from topoq.sim.engine import Simulation
    from topoq.sim.network import NetworkModel
    from topoq.sim.report import RunSeries

_Done = TypeVar("_Done")


@dataclass(frozen=True)
class TraceRequest:
    """``topoq simulate --trace``: the trace, its format if given, and what replaces the
    cluster and policy derived from it."""

    path: Path | None
    trace_format: str | None
    cluster: Path | None
    policies: tuple[Path, ...] = ()
    limit: int | None = None
    jobs: int = 1
    """How many replays run at once when there are several policies."""
    placements: tuple[str, ...] = ()
    """``--placement``: how the cycles place gangs (``PlacementMode`` values; none: topoq's);
    several compare the replays under each."""
    cost_model: bool | None = None
    """``--cost-model/--no-cost-model`` (None: on for a trace, off for a scenario)."""
    network: Path | None = None
    """``--network``: the cost model's figures (implies the model)."""
    name: str | None = None
    """What one replay of a comparison is called in its table."""
    time_limit_factor: float | None = None
    """``--time-limit-factor``: each trace job's time limit, as a multiple of its duration."""
    queue_orders: tuple[str, ...] = ()
    """``--queue-order``: the policy's order of jobs of one priority replaced (``QueueOrder``
    values; none: the policy's); several compare the replays under each."""


def run_simulate(
    scenario: Path | None,
    log: Path | None,
    output: str,
    trace: TraceRequest | None = None,
    report: Path | None = None,
) -> None:
    """``report``: the directory to write the HTML report into (``--report``)."""
    request = trace or TraceRequest(None, None, None)
    _refuse_shortest_first_without_limits(request)
    if max(len(request.policies), len(request.placements), len(request.queue_orders)) > 1:
        if request.path is None or scenario is not None:
            raise InvalidInputError(
                "several --policy, --placement or --queue-order compare replays of a trace",
                hint="give --trace FILE (and no scenario file), or one of each",
            )
        _compare(request.path, request, log, output, report)
        return
    chosen = _scenario_to_run(scenario, request)
    if report is not None:
        make_report_directory(report)
    result = _run_showing_progress(chosen, request)
    err = make_console(stderr=True)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {warning}")
    if log is not None:
        text = "".join(f"{line}\n" for line in json_lines(result.log))
        log.write_text(text, encoding="utf-8")
    if output == "jsonl":
        for line in json_lines(result.log):
            print(line)
    elif output == "json":
        print(json.dumps(result.document(), indent=2))
    else:
        print_simulation(make_console(), result)
    if report is not None:
        _report_one_run(report, scenario, request, chosen, result)


def _refuse_shortest_first_without_limits(request: TraceRequest) -> None:
    """``--queue-order shortest-first`` orders by time limits: on a trace (which records none)
    without ``--time-limit-factor`` or a policy whose classes set limits, it would order as
    ``submission`` does and compare nothing."""
    from topoq.discovery.policy import load_policy

    if "shortest-first" not in request.queue_orders or request.time_limit_factor is not None:
        return
    if request.path is None:
        return  # refused as an option that goes with --trace
    limited = any(
        cls.time_limit_s is not None
        for policy in request.policies
        for cls in load_policy(policy).priority_classes
    )
    if not limited:
        raise InvalidInputError(
            "--queue-order shortest-first orders jobs by their time limits, and the trace "
            "records none",
            hint="give --time-limit-factor F to limit each job to its duration times F, say "
            "1.5; or a --policy whose priority classes set a timeLimit",
        )


def _scenario_to_run(scenario: Path | None, request: TraceRequest) -> Scenario:
    """The scenario file's, or the trace's; a usage error for both or neither, and for the
    trace's options without a trace."""
    if scenario is not None and request.path is not None:
        raise InvalidInputError(
            "a scenario file and --trace cannot go together",
            hint="topoq simulate SCENARIO, or topoq simulate --trace FILE",
        )
    if request.path is None:
        given = (request.trace_format, request.cluster, request.limit, request.time_limit_factor)
        if any(option is not None for option in given) or request.policies or request.queue_orders:
            raise InvalidInputError(
                "--trace-format, --cluster, --policy, --limit, --time-limit-factor and "
                "--queue-order go with --trace",
                hint="give --trace FILE, or a scenario file (it names its cluster and policy)",
            )
        if scenario is None:
            raise InvalidInputError(
                "give a scenario file or --trace FILE",
                hint="topoq simulate SCENARIO, or topoq simulate --trace FILE (see --help)",
            )
        return load_scenario(scenario)
    return _trace_scenario(request.path, request)


def _trace_scenario(path: Path, request: TraceRequest) -> Scenario:
    from topoq.discovery.policy import load_policy
    from topoq.discovery.sources import load_cluster
    from topoq.domain.governance import QueueOrder
    from topoq.sim.traces import TraceFormat, read_trace, trace_scenario

    chosen = None if request.trace_format is None else TraceFormat(request.trace_format)
    trace = read_trace(path, chosen, limit=request.limit)
    cluster = None
    if request.cluster is not None:
        loaded = load_cluster(request.cluster)
        cluster = (loaded.nodes, loaded.topology)
    policy = load_policy(request.policies[0]) if request.policies else None
    scenario = trace_scenario(trace, cluster, policy, request.time_limit_factor)
    if not request.queue_orders:
        return scenario
    order = QueueOrder(request.queue_orders[0])
    return replace(scenario, policy=replace(scenario.policy, queue_order=order))


def make_report_directory(directory: Path) -> None:
    """Make ``--report``'s directory before the run, so that one that cannot be used is said
    at once rather than after a long replay."""
    if directory.exists() and not directory.is_dir():
        raise InvalidInputError(
            f"--report {directory}: a file is there, not a directory",
            hint="name a directory; it is made if missing",
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidInputError(
            f"--report {directory}: cannot make the directory ({error.strerror or error})"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--report {directory}: the directory cannot be written to")


def _report_one_run(
    directory: Path,
    scenario: Path | None,
    request: TraceRequest,
    chosen: Scenario,
    result: SimulationResult,
) -> None:
    """The report of a scenario's run, or of a trace's replay under one policy."""
    from topoq.sim.report import run_series

    if request.path is None:
        name, source = result.scenario, f"scenario {scenario}"
    else:
        name = _policy_name(request.policies[0] if request.policies else None)
        source = f"trace {request.path}"
    write_report_saying_where(directory, [run_series(name, result, chosen.policy)], source)


def write_report_saying_where(directory: Path, runs: Sequence[RunSeries], source: str) -> None:
    """Write the report and say where (on standard error: standard output is the table or
    the document, unchanged)."""
    from topoq.sim.report import write_report

    path = write_report(directory, runs, source=source)
    make_console(stderr=True).print(f"report: {path}", markup=False)


def _simulation(scenario: Scenario, request: TraceRequest) -> Simulation:
    """The run the request asks for: its placement mode and cost model."""
    from topoq.core.cycle import PlacementMode
    from topoq.sim.engine import Simulation

    placement = PlacementMode(request.placements[0]) if request.placements else None
    return Simulation(scenario, _network_of(request), placement or PlacementMode.TOPOQ)


def _network_of(request: TraceRequest) -> NetworkModel | None:
    """The cost model: ``--network``'s, the defaults, or none (``TraceRequest.cost_model``)."""
    from topoq.sim.network import NetworkModel, read_network

    if request.network is not None:
        if request.cost_model is False:
            raise InvalidInputError(
                "--network sets the cost model that --no-cost-model turns off",
                hint="leave one of them out",
            )
        return read_network(request.network)
    wanted = request.cost_model if request.cost_model is not None else request.path is not None
    return NetworkModel() if wanted else None


def _run_showing_progress(scenario: Scenario, request: TraceRequest) -> SimulationResult:
    """The run, with a progress bar on standard error when it is a terminal: simulated time
    against the last event's, cycles and cycles per second (gone when the run ends)."""
    from rich.progress import BarColumn, Progress, TextColumn

    simulation = _simulation(scenario, request)
    console = make_console(stderr=True)
    if not console.is_terminal:
        return simulation.run()
    horizon = max((event.at_s for event in scenario.events), default=0.0) or 1.0
    columns = (TextColumn("simulating"), BarColumn(), TextColumn("{task.fields[detail]}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("simulating", total=horizon, detail="")
        began = time.monotonic()

        def tell(simulated_s: float, cycles: int) -> None:
            rate = cycles / max(time.monotonic() - began, 1e-9)
            detail = f"{duration(simulated_s)} simulated, {cycles:,} cycles, {rate:,.0f}/s"
            bar.update(task, completed=min(simulated_s, horizon), detail=detail)

        return simulation.run(tell)


def _compare(
    path: Path, request: TraceRequest, log: Path | None, output: str, report: Path | None
) -> None:
    """Replay the trace under each policy (``request.jobs`` at once) and print one table."""

    if log is not None or output == "jsonl":
        raise InvalidInputError(
            "a decision log is one run's, and several --policy make several runs",
            hint="leave --log and -o jsonl out, or give one --policy",
        )
    policies: tuple[Path | None, ...] = request.policies or (None,)
    placements: tuple[str | None, ...] = request.placements or (None,)
    orders: tuple[str | None, ...] = request.queue_orders or (None,)

    def named(policy: Path | None, placement: str | None, order: str | None) -> str:
        """By what tells the run apart: the policy, placement and order compared."""
        parts = [
            _policy_name(policy) if len(policies) > 1 else None,
            placement if len(placements) > 1 else None,
            order if len(orders) > 1 else None,
        ]
        return " · ".join(part for part in parts if part) or _policy_name(policy)

    runs = [
        replace(
            request,
            policies=() if policy is None else (policy,),
            placements=() if placement is None else (placement,),
            queue_orders=() if order is None else (order,),
            jobs=1,
            name=named(policy, placement, order),
        )
        for policy in policies
        for placement in placements
        for order in orders
    ]
    if report is None:
        _print_comparison_as(output, _each(_figures_of, runs, request.jobs))
        return
    make_report_directory(report)
    series = _each(_series_of, runs, request.jobs)
    _print_comparison_as(output, [one.figures for one in series])
    write_report_saying_where(report, series, f"trace {path}")


def _print_comparison_as(output: str, figures: Sequence[PolicyFigures]) -> None:
    if output == "json":
        print(json.dumps([one.document() for one in figures], indent=2))
    else:
        print_comparison(make_console(), figures)


def _each(
    replay: Callable[[TraceRequest], _Done], runs: list[TraceRequest], jobs: int
) -> list[_Done]:
    """``replay`` of each run, ``jobs`` at once, each in a process of its own."""
    if jobs == 1:
        return [replay(run) for run in runs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(runs))) as pool:
        return list(pool.map(replay, runs))


def _figures_of(request: TraceRequest) -> PolicyFigures:
    """One policy's replay, reduced to its figures (in a worker process when run at once)."""
    from topoq.sim.compare import policy_figures

    result = _run_showing_progress(_scenario_of(request), request)
    return policy_figures(request.name or _policy_name(None), result)


def _series_of(request: TraceRequest) -> RunSeries:
    """One policy's replay, reduced to what the report shows of it: its figures and series,
    much smaller than its decision log to send back from a worker process."""
    from topoq.sim.report import run_series

    scenario = _scenario_of(request)
    result = _run_showing_progress(scenario, request)
    return run_series(request.name or _policy_name(None), result, scenario.policy)


def _scenario_of(request: TraceRequest) -> Scenario:
    assert request.path is not None
    return _trace_scenario(request.path, request)


def _policy_name(policy: Path | None) -> str:
    return "derived policy" if policy is None else policy.name


def print_comparison(console: Console, figures: Sequence[PolicyFigures]) -> None:
    """A column per policy, a row per figure (so that the figures fit a terminal's width
    whatever their number); then, per team, its wait and GPU-hours under each."""
    table = Table(box=box.SIMPLE, title="The same arrivals under each policy")
    table.add_column("", overflow="fold")
    by_policy = [summary_cells(one, duration) for one in figures]
    for column in by_policy:  # a name too long for its column wraps, never cut
        table.add_column(column[0], justify="right", overflow="fold")
    for row, figure in enumerate(SUMMARY_COLUMNS[1:], start=1):
        table.add_row(figure, *(column[row] for column in by_policy))
    console.print(table)
    teams = Table(
        box=box.SIMPLE, title="Per team: wait (mean / p99) and GPU-hours in guarantee + borrowed"
    )
    teams.add_column("Team")
    for one in figures:
        teams.add_column(one.policy, justify="right")
    names = sorted({team.team for one in figures for team in one.teams})
    for name in names:
        cells = []
        for one in figures:
            found = next((team for team in one.teams if team.team == name), None)
            cells.append(
                "-"
                if found is None
                else f"{_time(found.wait.mean)} / {_time(found.wait.p99)}; "
                f"{found.gpu_hours_in_guarantee:.0f} + {found.gpu_hours_borrowed:.0f} h"
            )
        teams.add_row(name, *cells)
    console.print(teams)
    console.print(
        "Fairness: Jain's index of the teams' GPU-hours over their weights (1: in "
        "proportion to the weights)."
    )


def _spread(spread: Spread) -> str:
    return f"{_time(spread.mean)} / {_time(spread.p50)} / {_time(spread.p99)}"


def _time(seconds: float | None) -> str:
    return "-" if seconds is None else duration(seconds)


def placement_line(result: SimulationResult) -> str | None:
    """Under the cost model: how much the placements slowed the runs, and how many gangs were
    as tight as the free capacity allowed (None: no cost model in the run)."""
    from topoq.sim.compare import policy_figures

    figures = policy_figures(result.scenario, result)
    slowdown = figures.slowdown
    if slowdown.mean is None or slowdown.p99 is None:
        return None
    tight = (
        ""
        if figures.at_best_span is None
        else f"; {figures.at_best_span:.0%} of multi-node gangs at their best span"
    )
    return (
        f"Placement slow-down (cost model): mean {slowdown.mean:.3f}, p99 {slowdown.p99:.3f}{tight}"
    )


def print_simulation(console: Console, result: SimulationResult) -> None:
    summary = result.summary
    span = duration(summary.end_s - summary.start_s)
    console.print(
        f"[bold]Scenario {result.scenario}[/]: {span} simulated in {result.cycles} cycles; "
        f"GPU utilisation {summary.utilisation:.0%} of {summary.capacity_gpus} GPUs"
    )
    console.print(team_table(summary.teams))
    placement = placement_line(result)
    if placement is not None:
        console.print(placement)
    eta = result.eta_error
    if eta.jobs and eta.mean_abs_s is not None and eta.p90_abs_s is not None:
        console.print(
            f"ETA error over {eta.jobs} job(s): mean {duration(eta.mean_abs_s)}, "
            f"p90 {duration(eta.p90_abs_s)} (first ETA given vs. actual start)"
        )
    if result.still_running:
        console.print(f"{len(result.still_running)} job(s) still running at the end")
    groups = pending_groups(result.left_pending)
    if groups:
        console.print(f"[yellow]{len(result.left_pending)} job(s) left pending:[/]")
    for (team, reason), jobs in groups.items():
        example = jobs[0]
        console.print(
            f"  {team}: {len(jobs)} × {reason or 'not considered'}, e.g. {example.job}: "
            f"{example.message or ''}"
        )


def pending_groups(jobs: Iterable[LeftPending]) -> dict[tuple[str, str | None], list[LeftPending]]:
    """Jobs left pending, grouped by team and reason (in order of first appearance)."""
    groups: dict[tuple[str, str | None], list[LeftPending]] = {}
    for job in jobs:
        groups.setdefault((job.team, job.reason), []).append(job)
    return groups


_COLUMNS = (
    ("Team", "left"),
    ("Weight", "right"),
    ("Guarantee", "right"),
    ("Jobs", "right"),
    ("Done / failed\n/ cancelled", "right"),
    ("GPU-h in\nguarantee", "right"),
    ("GPU-h\nborrowed", "right"),
    ("Wait mean\n/ p50 / p95", "right"),
    ("Preempted\n/ caused", "right"),
)


def team_table(teams: tuple[TeamSummary, ...]) -> Table:
    """One row per team; the borrowed GPU-hours with each team's share of all borrowing."""
    table = Table(box=box.SIMPLE_HEAD)
    for heading, justify in _COLUMNS:
        table.add_column(heading, justify="left" if justify == "left" else "right", no_wrap=True)
    borrowed_total = sum(team.gpu_hours_borrowed for team in teams)
    for team in teams:
        share = team.gpu_hours_borrowed / borrowed_total if borrowed_total else 0.0
        wait = team.wait
        waits = (
            " / ".join(duration(value or 0.0) for value in (wait.mean_s, wait.p50_s, wait.p95_s))
            if wait.started
            else "—"
        )
        table.add_row(
            team.team,
            str(team.weight),
            f"{team.guarantee_gpus} GPUs",
            str(team.submitted),
            f"{team.completed} / {team.failed} / {team.cancelled}",
            f"{team.gpu_hours_in_guarantee:.1f}",
            f"{team.gpu_hours_borrowed:.1f} ({share:.0%})",
            waits,
            f"{team.preemptions_suffered} / {team.preemptions_caused}",
        )
    return table


def duration(seconds: float) -> str:
    """``45s``, ``12m30s``, ``2h05m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m"
