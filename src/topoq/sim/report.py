"""The report of ``topoq simulate --report DIR``: one self-contained HTML file, ``report.html``,
with the comparison tables and the plots of each run — waits, GPU utilisation and queue length
over time, each team's GPUs inside its guarantee and borrowed, placement slow-down.

Two steps, so that a replay run in a worker process (``--jobs``) sends back what the report
draws rather than its decision log (millions of entries for a whole trace): :func:`run_series`
reduces a run to a :class:`RunSeries`, :func:`write_report` draws them. The plots are PNGs that
matplotlib's Agg renderer draws from a :class:`~matplotlib.figure.Figure` made without pyplot
(no GUI backend, no global figure state), embedded as ``data:`` URLs: the file opens anywhere,
offline, with no script. matplotlib is imported only when a report is drawn, as the CLI's
start-up must not pay for it.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from topoq.domain.durations import format_duration
from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName
from topoq.sim.compare import SUMMARY_COLUMNS, PolicyFigures, policy_figures, summary_cells
from topoq.sim.engine import SimulationResult
from topoq.sim.log import JOINS_THE_QUEUE, LEAVES_THE_QUEUE, Decision, LogEntry
from topoq.sim.summary import (
    guarantee_levels,
    guarantees,
    usage_changes,
    usage_intervals,
    wait_times,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REPORT_FILE = "report.html"
NO_COST_MODEL = "No cost model in this run: no start gave a placement slow-down."


Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Steps:
    """A quantity that changes in steps: ``values[i]`` from ``times_s[i]`` to the next time."""

    times_s: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class GuaranteeSplit:
    """A team's GPUs in use of one flavor after each change: inside its guarantee, borrowed."""

    team: TeamName
    in_guarantee: Steps
    borrowed: Steps


@dataclass(frozen=True)
class RunSeries:
    """What the report shows of one run."""

    figures: PolicyFigures
    capacity_gpus: int
    start_s: float
    end_s: float
    waits: Mapping[TeamName, tuple[float, ...]]
    """Per team, submission to first start of each job that started."""
    usage: tuple[GuaranteeSplit, ...]
    """The split GPU-hours in guarantee and borrowed integrate (``summary.gpu_hours``)."""
    pending: Steps
    """Jobs waiting to start (held ones too)."""
    slowdowns: tuple[float, ...]
    """Of the starts that carry one: how much slower the run goes for its placement."""

    @property
    def name(self) -> str:
        return self.figures.policy


def run_series(name: str, result: SimulationResult, policy: ClusterPolicy) -> RunSeries:
    """The report's view of one run (``name``: how to call it; ``policy``: the run's, whose
    guarantees tell in-guarantee from borrowed GPUs)."""
    summary = result.summary
    guaranteed = guarantees(policy)
    usage = tuple(
        _split(team, guarantee_levels(changes, guaranteed.get((team, FlavorName(flavor)), 0)))
        for (team, flavor), changes in usage_changes(
            usage_intervals(result.log, summary.end_s)
        ).items()
    )
    return RunSeries(
        figures=policy_figures(name, result),
        capacity_gpus=summary.capacity_gpus,
        start_s=summary.start_s,
        end_s=summary.end_s,
        waits={team: tuple(waits) for team, waits in wait_times(result.log).items()},
        usage=usage,
        pending=pending_jobs(result.log),
        slowdowns=slowdowns(result.log),
    )


def _split(team: TeamName, levels: Iterable[tuple[float, float, float]]) -> GuaranteeSplit:
    times, inside, borrowed = zip(*levels, strict=True)
    return GuaranteeSplit(team, Steps(times, inside), Steps(times, borrowed))


def pending_jobs(entries: Iterable[LogEntry]) -> Steps:
    """How many jobs wait to start, after each instant at which that changes."""
    waiting: set[str] = set()
    times: list[float] = []
    counts: list[float] = []
    for entry in entries:
        if entry.job is None:
            continue
        if entry.decision in JOINS_THE_QUEUE:
            waiting.add(entry.job)
        elif entry.decision in LEAVES_THE_QUEUE:
            waiting.discard(entry.job)
        else:
            continue
        if times and times[-1] == entry.t:
            counts[-1] = len(waiting)
        else:
            times.append(entry.t)
            counts.append(len(waiting))
    return Steps(tuple(times), tuple(counts))


def slowdowns(entries: Iterable[LogEntry]) -> tuple[float, ...]:
    """Under the cost model, how many times as long as its trace says each run that ended
    took (the ``slowdown`` of its finish)."""
    return tuple(
        entry.slowdown
        for entry in entries
        if entry.decision is Decision.FINISH and entry.slowdown is not None
    )


# --- the file -------------------------------------------------------------------------------
def write_report(directory: Path, runs: Sequence[RunSeries], *, source: str) -> Path:
    """Write ``directory/report.html`` (the directory made if missing) and return its path.
    ``source`` says what was run: ``trace FILE`` or ``scenario FILE``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REPORT_FILE
    path.write_text(report_html(runs, source=source), encoding="utf-8")
    return path


def report_html(runs: Sequence[RunSeries], *, source: str) -> str:
    colors = _team_colors(_teams_of(runs))
    slowdown = _slowdown_plot(runs)
    sections = [
        _heading(runs, source),
        "<h2>Summary</h2>",
        summary_table([run.figures for run in runs]),
        "<p>Fairness: Jain's index of the teams' GPU-hours over their weights (1: in "
        "proportion to the weights, 1/n: one of n teams got them all).</p>",
        "<h2>Per team</h2>",
        team_table([run.figures for run in runs]),
        "<h2>Wait</h2>",
        _plot(
            _wait_plot(runs),
            "Of the jobs that started, the share (y) that waited at most x from submission to "
            "first start: a curve further up and left waits less.",
        ),
        *(
            _plot(
                _team_wait_plot(run, colors),
                f"{run.name}: the same, one line per team. A team far right of the others "
                "waits longer than they do.",
            )
            for run in runs
        ),
        "<h2>GPU utilisation and queue</h2>",
        _plot(
            _utilisation_plot(runs),
            "GPUs in use over the simulated time, as a share of the cluster's.",
        ),
        _plot(
            _queue_plot(runs),
            "Jobs waiting to start over the simulated time: a queue that keeps growing means "
            "more work arrives than the cluster runs.",
        ),
        "<h2>GPUs in use by team</h2>",
        *(
            _plot(
                _team_gpus_plot(run, colors),
                f"{run.name}: each team's GPUs in use, stacked; plain inside its guarantee, "
                "hatched above it (borrowed). Their areas are the per-team table's GPU-hours.",
            )
            for run in runs
        ),
        "<h2>Placement slow-down</h2>",
        _paragraph(NO_COST_MODEL)
        if slowdown is None
        else _plot(
            slowdown,
            "Of the starts, the share (y) whose run starts at most x times slower than on its "
            "tightest placement alone, for how its gang was spread and the traffic around it.",
        ),
    ]
    title = f"topoq simulation report: {source}"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )


_STYLE = (
    "body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    "th:first-child,td:first-child{text-align:left}"
    "figure{margin:1.5em 0}img{max-width:100%}figcaption{color:#555}"
    "dt{font-weight:bold;float:left;clear:left;width:9em}dd{margin-left:10em}"
)


def _heading(runs: Sequence[RunSeries], source: str) -> str:
    spans = "; ".join(f"{run.name}: {format_duration(run.end_s - run.start_s)}" for run in runs)
    clusters = sorted({run.capacity_gpus for run in runs})
    facts = {
        "Input": source,
        "Runs": ", ".join(run.name for run in runs),
        "Cluster": " / ".join(f"{gpus:,} GPUs" for gpus in clusters),
        "Simulated": spans,
        "Written": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts.items())
    return f"<h1>Simulation report</h1>\n<dl>{items}</dl>"


def _paragraph(text: str) -> str:
    return f"<p>{escape(text)}</p>"


def _plot(figure: Figure, caption: str) -> str:
    """The figure as an embedded PNG, with how to read it."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    title = figure.axes[0].get_title()
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{escape(title)}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


# --- tables ---------------------------------------------------------------------------------
TEAM_COLUMNS = ("Wait mean", "Wait p99", "GPU-h in guarantee", "GPU-h borrowed")


def summary_table(figures: Sequence[PolicyFigures]) -> str:
    """One row per policy, as the terminal's comparison table."""
    rows = [summary_cells(one, format_duration) for one in figures]
    return _table([_header_row(SUMMARY_COLUMNS)], rows)


def team_table(figures: Sequence[PolicyFigures]) -> str:
    """One row per team; under each policy, the team's wait and GPU-hours."""
    policies = "".join(
        f'<th colspan="{len(TEAM_COLUMNS)}">{escape(one.policy)}</th>' for one in figures
    )
    header = [
        f'<tr><th rowspan="2">Team</th>{policies}</tr>',
        _header_row(TEAM_COLUMNS * len(figures)),
    ]
    rows = []
    for team in sorted({team.team for one in figures for team in one.teams}):
        cells = [team]
        for one in figures:
            found = next((mine for mine in one.teams if mine.team == team), None)
            cells += (
                ["-"] * len(TEAM_COLUMNS)
                if found is None
                else [
                    time_text(found.wait.mean),
                    time_text(found.wait.p99),
                    f"{found.gpu_hours_in_guarantee:.1f}",
                    f"{found.gpu_hours_borrowed:.1f}",
                ]
            )
        rows.append(tuple(cells))
    return _table(header, rows)


def time_text(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def _header_row(columns: Iterable[str]) -> str:
    return "<tr>" + "".join(f"<th>{escape(column)}</th>" for column in columns) + "</tr>"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead>{''.join(header)}</thead><tbody>{body}</tbody></table>"


# --- plots ----------------------------------------------------------------------------------
TIME_UNITS = (("days", 86400.0), ("h", 3600.0), ("min", 60.0))


def time_unit(largest_s: float) -> tuple[str, float]:
    """The unit a time axis up to ``largest_s`` reads best in: the largest of which it spans
    at least two."""
    return next(((name, size) for name, size in TIME_UNITS if largest_s >= 2 * size), ("s", 1.0))


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 4), layout="constrained")
    axes = figure.subplots()
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axes.grid(alpha=0.3)
    return figure, axes


def _finish(axes: Axes, legend_title: str) -> None:
    """The x axis from 0 (times and waits are never negative); the legend inside the plot for
    a few lines, beside it for many (a team per line: up to ~20), none when nothing was drawn."""
    axes.set_xlim(left=0)
    labels = axes.get_legend_handles_labels()[1]
    if not labels:
        return
    if len(labels) > 6:
        axes.legend(
            title=legend_title, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small"
        )
    else:
        axes.legend(title=legend_title)


def _wait_plot(runs: Sequence[RunSeries]) -> Figure:
    waits = {run.name: [wait for team in run.waits.values() for wait in team] for run in runs}
    unit, size = time_unit(max((max(w, default=0.0) for w in waits.values()), default=0.0))
    figure, axes = _figure(
        "Wait from submission to first start", f"wait ({unit})", "share of started jobs"
    )
    for name, values in waits.items():
        if values:
            axes.ecdf(np.array(values) / size, label=name)
    _finish(axes, "policy")
    return figure


def _team_wait_plot(run: RunSeries, colors: Mapping[str, str]) -> Figure:
    largest = max((max(waits) for waits in run.waits.values() if waits), default=0.0)
    unit, size = time_unit(largest)
    figure, axes = _figure(
        f"Wait per team: {run.name}", f"wait ({unit})", "share of the team's started jobs"
    )
    for team, waits in sorted(run.waits.items()):
        axes.ecdf(np.array(waits) / size, label=team, color=colors[team])
    _finish(axes, "team")
    return figure


def _utilisation_plot(runs: Sequence[RunSeries]) -> Figure:
    unit, size = _span_unit(runs)
    figure, axes = _figure(
        "GPU utilisation", f"simulated time ({unit})", "GPUs in use (% of the cluster's)"
    )
    for run in runs:
        grid, inside, borrowed = _team_levels(run)
        in_use = sum((inside[team] + borrowed[team] for team in inside), np.zeros_like(grid))
        share = 100 * in_use / max(run.capacity_gpus, 1)
        axes.step((grid - run.start_s) / size, share, where="post", label=run.name)
    axes.set_ylim(0, 105)
    _finish(axes, "policy")
    return figure


def _queue_plot(runs: Sequence[RunSeries]) -> Figure:
    unit, size = _span_unit(runs)
    figure, axes = _figure("Queue length", f"simulated time ({unit})", "jobs waiting to start")
    for run in runs:
        times = np.array([*run.pending.times_s, run.end_s])
        counts = [*run.pending.values, run.pending.values[-1] if run.pending.values else 0]
        axes.step((times - run.start_s) / size, counts, where="post", label=run.name)
    _finish(axes, "policy")
    return figure


def _team_gpus_plot(run: RunSeries, colors: Mapping[str, str]) -> Figure:
    unit, size = time_unit(run.end_s - run.start_s)
    figure, axes = _figure(
        f"GPUs in use by team: {run.name}", f"simulated time ({unit})", "GPUs in use"
    )
    grid, inside, borrowed = _team_levels(run)
    teams = sorted(team for team in inside if inside[team].any() or borrowed[team].any())
    lent = [team for team in teams if borrowed[team].any()]
    if teams:  # else nothing ran
        axes.stackplot(
            (grid - run.start_s) / size,
            *(inside[team] for team in teams),
            *(borrowed[team] for team in lent),
            labels=teams,  # the borrowed layers go unlabelled: one hatched patch stands for them
            colors=[colors[team] for team in (*teams, *lent)],
            hatch=[""] * len(teams) + ["///"] * len(lent),
            step="post",
            linewidth=0,
        )
    if lent:  # an empty area, for the legend alone
        axes.fill_between(
            [], [], label="borrowed (hatched)", facecolor="white", edgecolor="grey", hatch="///"
        )
    capacity = f"cluster ({run.capacity_gpus:,} GPUs)"
    axes.axhline(run.capacity_gpus, color="black", linestyle="--", linewidth=1, label=capacity)
    _finish(axes, "team")
    return figure


def _slowdown_plot(runs: Sequence[RunSeries]) -> Figure | None:
    """None when no run gave a start a slow-down (no cost model)."""
    measured = [run for run in runs if run.slowdowns]
    if not measured:
        return None
    figure, axes = _figure(
        "Placement slow-down",
        "slow-down (× the run time on its tightest placement alone)",
        "share of starts",
    )
    for run in measured:
        axes.ecdf(run.slowdowns, label=run.name)
    _finish(axes, "policy")
    return figure


def _span_unit(runs: Sequence[RunSeries]) -> tuple[str, float]:
    return time_unit(max((run.end_s - run.start_s for run in runs), default=0.0))


def _team_levels(run: RunSeries) -> tuple[Floats, dict[TeamName, Floats], dict[TeamName, Floats]]:
    """Every instant at which a team's GPUs in use change (and the run's start and end), and
    per team its GPUs inside its guarantee and borrowed from each (its flavors added up)."""
    grid = np.unique(
        np.array([run.start_s, run.end_s, *(t for s in run.usage for t in s.in_guarantee.times_s)])
    )
    inside: dict[TeamName, Floats] = {}
    borrowed: dict[TeamName, Floats] = {}
    for split in run.usage:
        zero = np.zeros_like(grid)
        inside[split.team] = inside.get(split.team, zero) + _at(grid, split.in_guarantee)
        borrowed[split.team] = borrowed.get(split.team, zero) + _at(grid, split.borrowed)
    return grid, inside, borrowed


def _at(grid: Floats, steps: Steps) -> Floats:
    """The value of ``steps`` at each instant of ``grid`` (0 before its first change)."""
    index = np.searchsorted(np.array(steps.times_s), grid, side="right") - 1
    values = np.array([0.0, *steps.values])
    return values[index + 1]


def _teams_of(runs: Sequence[RunSeries]) -> list[str]:
    """Every team a table or a plot names."""
    teams: set[str] = set()
    for run in runs:
        teams.update(team.team for team in run.figures.teams)
        teams.update(run.waits)
        teams.update(split.team for split in run.usage)
    return sorted(teams)


def _team_colors(teams: Sequence[str]) -> dict[str, str]:
    """A colour per team, the same in every plot: tab20's strong colours first, then its light
    ones (20 teams before one repeats)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = colormaps["tab20"]
    order = [to_hex(palette(index)) for index in (*range(0, 20, 2), *range(1, 20, 2))]
    return {team: order[index % len(order)] for index, team in enumerate(teams)}
