"""``topoq whatif``: replay the jobs a server recorded over a window under the policy then in
force and under a changed one, and show beside what was recorded what would have been
different, per team (``topoq.sim.history``; docs/simulate.md, "What-if on recorded history").
The comparison table and the report are ``topoq simulate --policy A --policy B``'s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

from topoq.cli.console import make_console
from topoq.cli.simulate_command import (
    duration,
    make_report_directory,
    print_comparison,
    write_report_saying_where,
)
from topoq.domain import durations
from topoq.domain.errors import InvalidInputError
from topoq.sim.compare import PolicyFigures
from topoq.sim.engine import SimulationResult

if TYPE_CHECKING:
    from topoq.domain.governance import ClusterPolicy
    from topoq.sim.history import RecordedHistory, Window


@dataclass(frozen=True)
class WhatIfRequest:
    """``topoq whatif``'s options."""

    database: str | None
    since: str
    until: str
    policy: Path
    levels: tuple[str, ...] = ()
    report: Path | None = None
    output: str = "table"
    server: str | None = None
    """Read the history from this server (``GET /reports/history``) instead of a database."""
    token: str | None = None


@dataclass(frozen=True)
class Replay:
    """One row of the comparison: its figures and its run."""

    figures: PolicyFigures
    result: SimulationResult


def moment_s(text: str, option: str) -> float:
    """``durations.moment_s``, its refusal said as a usage error naming the option."""
    try:
        return durations.moment_s(text)
    except durations.NotAMoment as refused:
        raise InvalidInputError(str(refused), where=option, hint=refused.hint) from None


def run_whatif(request: WhatIfRequest) -> None:
    """Check everything given before reading the database, then replay and print."""
    from topoq.discovery.policy import load_policy
    from topoq.sim.history import Window, open_recorded_store, read_history

    if (request.database is None) == (request.server is None):
        raise InvalidInputError(
            "give the history's source once: --database or --server"
            if request.database is None
            else "--database and --server both given",
            where="--database/--server",
            hint="--database sqlite:///DATA_DIR/topoq.db (the server's database, read only), "
            "or --server URL (a running server, with an admin token)",
        )
    window = Window(moment_s(request.since, "--since"), moment_s(request.until, "--until"))
    changed = load_policy(request.policy)
    if request.report is not None:
        make_report_directory(request.report)
    if request.database is not None:
        with open_recorded_store(request.database) as store:
            history = read_history(store, window, levels=request.levels)
    else:
        history = _history_from_server(request, window)
    missing = [team for team in history.teams if team not in changed.by_team]
    if missing:
        raise InvalidInputError(
            f"the policy does not name team {', '.join(map(repr, missing))}, whose jobs are "
            "in the window: they could never run",
            where=str(request.policy),
            hint="add the team; `topoq policy show --version "
            f"{history.policy_version.version}` shows the policy in force then",
        )
    err = make_console(stderr=True)
    for warning in history.warnings:
        err.print(f"[yellow]warning:[/] {warning}")
    _show(request, history, _replays(history, changed, request.policy))


def _history_from_server(request: WhatIfRequest, window: Window) -> RecordedHistory:
    """What the server recorded over ``window``, as its admin API gives it."""
    from topoq.cli.server_commands import connected
    from topoq.discovery.policy import policy_from_document
    from topoq.sim.history import ServerRecords, read_history

    with connected(request.server, request.token) as client:

        def policy_at(version: int) -> ClusterPolicy:
            kept = client.policy_version(version).document
            return policy_from_document(kept, source=f"{client.server}: policy version {version}")

        recorded = client.recorded_window(window.since_s, window.until_s)
        records = ServerRecords(recorded, policy_at)
        return read_history(records, window, levels=request.levels, source=client.server)


def _replays(
    history: RecordedHistory, changed: ClusterPolicy, changed_file: Path
) -> list[tuple[Replay, ClusterPolicy]]:
    """What was recorded, the replay under the policy in force and under the changed one,
    each with the policy whose guarantees split its GPU-hours."""
    from topoq.sim.compare import policy_figures
    from topoq.sim.engine import Simulation
    from topoq.sim.history import history_scenario, recorded_result

    recorded = recorded_result(history)
    rows = [(Replay(policy_figures("recorded", recorded), recorded), history.policy)]
    replays = (
        (f"replayed: policy version {history.policy_version.version}", history.policy),
        (f"replayed: {changed_file.name}", changed),
    )
    for name, policy in replays:
        result = Simulation(history_scenario(history, policy, name)).run()
        rows.append((Replay(policy_figures(name, result), result), policy))
    return rows


def _show(
    request: WhatIfRequest,
    history: RecordedHistory,
    rows: Sequence[tuple[Replay, ClusterPolicy]],
) -> None:
    from topoq.sim.history import utc

    replays = [replay for replay, _ in rows]
    figures = [replay.figures for replay in replays]
    differences = team_differences(history.teams, replays[1], replays[2])
    if request.output == "json":
        document = {
            "database": history.source,
            "since": utc(history.window.since_s),
            "until": utc(history.window.until_s),
            "policy_in_force": {
                "version": history.policy_version.version,
                "set_at": utc(history.policy_version.at_s),
            },
            "changed_policy": str(request.policy),
            "runs": [one.document() for one in figures],
            "differences": differences,
            "warnings": list(history.warnings),
        }
        print(json.dumps(document, indent=2))
    else:
        console = make_console()
        version = history.policy_version
        console.print(
            f"[bold]{len(history.jobs)} job(s)[/] submitted from {utc(history.window.since_s)} "
            f"to {utc(history.window.until_s)}",
            highlight=False,
        )
        console.print(
            f"policy in force: version {version.version}, set at {utc(version.at_s)}",
            highlight=False,
        )
        print_comparison(console, figures)
        print_differences(console, differences, request.policy.name)
    if request.report is not None:
        from topoq.sim.report import run_series

        series = [run_series(r.figures.policy, r.result, policy) for r, policy in rows]
        source = f"history of {history.source} from {utc(history.window.since_s)} to " + utc(
            history.window.until_s
        )
        write_report_saying_where(request.report, series, source)


def team_differences(
    teams: Sequence[str], in_force: Replay, changed: Replay
) -> list[dict[str, Any]]:
    """Per team: the changed policy's replay minus the one in force — mean wait (seconds;
    None when either started none of its jobs), GPU-hours and preemptions suffered."""

    def figures(replay: Replay, team: str) -> tuple[float | None, float, int]:
        summary = replay.result.summary.team(team)
        return summary.wait.mean_s, summary.gpu_hours, summary.preemptions_suffered

    differences = []
    for team in teams:
        wait_before, hours_before, preempted_before = figures(in_force, team)
        wait_after, hours_after, preempted_after = figures(changed, team)
        wait = None if wait_before is None or wait_after is None else wait_after - wait_before
        differences.append(
            {
                "team": team,
                "wait_mean_s": wait,
                "gpu_hours": hours_after - hours_before,
                "preemptions": preempted_after - preempted_before,
            }
        )
    return differences


def print_differences(console: Console, differences: Sequence[dict[str, Any]], name: str) -> None:
    table = Table(box=box.SIMPLE, title=f"Per team: {name} − in force")
    for column in ("Team", "Wait mean", "GPU-hours", "Preemptions"):
        table.add_column(column, justify="left" if column == "Team" else "right")
    for row in differences:
        table.add_row(
            row["team"],
            _signed_time(row["wait_mean_s"]),
            f"{round(row['gpu_hours'], 1) + 0.0:+.1f}",  # + 0.0: no "-0.0"
            f"{row['preemptions']:+d}",
        )
    console.print(table)


def _signed_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return ("+" if seconds >= 0 else "-") + duration(abs(seconds))
