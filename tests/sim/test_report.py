"""``topoq simulate --report DIR`` (``topoq.sim.report``): the ITP sample replayed under a
policy that gives the team the whole cluster and one that gives it half, drawn into one HTML
file — read back with the standard library's parser: a PNG per plot embedded in the page,
tables whose figures are the replays', every name escaped — and the series behind the plots
checked against the decision log they come from. Then the option as a user runs it."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_cli import topoq
from tests.sim.conftest import SCENARIOS, WriteScenario, submit
from tests.sim.test_compare import POLICY
from tests.sim.test_traces import ITP
from topoq.discovery.policy import load_policy
from topoq.sim import LogEntry, Simulation, SimulationResult, load_scenario
from topoq.sim.compare import policy_figures
from topoq.sim.log import Decision
from topoq.sim.report import (
    NO_COST_MODEL,
    REPORT_FILE,
    RunSeries,
    Steps,
    pending_jobs,
    report_html,
    run_series,
    slowdowns,
    team_table,
    time_text,
    write_report,
)
from topoq.sim.traces import read_trace, trace_scenario

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_URL = "data:image/png;base64,"


class Page(HTMLParser):
    """What a reader of the report sees: its text, its images and its tables' cells."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.images: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.tags: set[str] = set()
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("")
            self._in_cell = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_cell:
            self.tables[-1][-1][-1] += data


def read_page(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@dataclass(frozen=True)
class Replay:
    name: str
    result: SimulationResult
    series: RunSeries


def replay(policy: Path) -> Replay:
    scenario = trace_scenario(read_trace(ITP), None, load_policy(policy))
    result = Simulation(scenario).run()
    return Replay(policy.name, result, run_series(policy.name, result, scenario.policy))


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("policies")
    whole, half = folder / "whole.yaml", folder / "half.yaml"
    whole.write_text(POLICY.format(name="whole", nodes=16))
    half.write_text(POLICY.format(name="half", nodes=8))
    return whole, half


@pytest.fixture(scope="module")
def replays(policies: tuple[Path, Path]) -> list[Replay]:
    return [replay(policy) for policy in policies]


@pytest.fixture(scope="module")
def page(replays: list[Replay], tmp_path_factory: pytest.TempPathFactory) -> Page:
    directory = tmp_path_factory.mktemp("report") / "new" / "folder"
    path = write_report(directory, [one.series for one in replays], source=f"trace {ITP}")
    assert path == directory / REPORT_FILE
    return read_page(path.read_text(encoding="utf-8"))


def test_the_report_is_one_page_with_every_plot_in_it(page: Page) -> None:
    # waits of all policies, waits per team (one per policy), utilisation, queue, GPUs by
    # team (one per policy); no slow-down plot: these replays have no cost model
    assert len(page.images) == 1 + 2 + 1 + 1 + 2
    for source in page.images:
        assert source.startswith(PNG_URL)
        assert base64.b64decode(source.removeprefix(PNG_URL), validate=True)[:8] == PNG_SIGNATURE
    assert NO_COST_MODEL in page.text
    assert not page.tags & {"script", "link", "iframe", "object"}  # nothing to run or fetch
    text = " ".join(page.text)
    assert f"trace {ITP}" in text and "whole.yaml, half.yaml" in text and "128 GPUs" in text


def test_the_summary_table_holds_each_policy_s_figures(page: Page, replays: list[Replay]) -> None:
    header, *rows = page.tables[0]
    assert header[:2] == ["Policy", "Jobs done"] and "Preempted" in header
    assert [row[0] for row in rows] == ["whole.yaml", "half.yaml"]
    for row, one in zip(rows, replays, strict=True):
        figures = policy_figures(one.name, one.result)
        cells = dict(zip(header, row, strict=True))
        assert cells["Jobs done"] == f"{figures.completed} of {figures.jobs}" == "40 of 40"
        assert cells["Preempted"] == str(figures.preemptions)
        wait = figures.wait
        assert cells["Wait mean / p50 / p99"] == " / ".join(
            time_text(value) for value in (wait.mean, wait.p50, wait.p99)
        )
        assert cells["Makespan"] == time_text(figures.makespan_s)
        assert cells["GPU util."] == f"{figures.utilisation:.0%}"
    assert replays[1].series.figures.wait.mean > replays[0].series.figures.wait.mean  # half


def test_the_team_table_holds_each_team_s_wait_and_gpu_hours(
    page: Page, replays: list[Replay]
) -> None:
    policies, columns, *rows = page.tables[1]
    assert policies == ["Team", "whole.yaml", "half.yaml"]
    assert columns == ["Wait mean", "Wait p99", "GPU-h in guarantee", "GPU-h borrowed"] * 2
    [row] = rows
    assert row[0] == "itp"
    for index, one in enumerate(replays):
        [team] = policy_figures(one.name, one.result).teams
        cells = row[1 + 4 * index : 5 + 4 * index]
        assert cells == [
            time_text(team.wait.mean),
            time_text(team.wait.p99),
            f"{team.gpu_hours_in_guarantee:.1f}",
            f"{team.gpu_hours_borrowed:.1f}",
        ]


def test_every_name_is_escaped(replays: list[Replay]) -> None:
    figures = replays[0].series.figures
    hostile = "<script>alert('team')</script>"
    renamed = replace(figures, teams=(replace(figures.teams[0], team=hostile),))
    html = team_table([renamed])
    assert "<script>" not in html
    assert hostile in read_page(html).tables[0][2][0]  # read back as it was named
    series = replace(replays[0].series, figures=replace(renamed, policy=hostile))
    whole = report_html([series], source=f"trace {hostile}")
    assert "<script>" not in whole
    assert hostile in " ".join(read_page(whole).text)


def test_the_gpus_by_team_are_the_gpu_hours_of_the_summary() -> None:
    """The stacked areas (reclaim: nlp borrows until vision reclaims) add up to the
    summary's GPU-hours inside the guarantee and borrowed, as they split them alike."""
    scenario = load_scenario(SCENARIOS / "reclaim.yaml")
    result = Simulation(scenario).run()
    series = run_series("reclaim", result, scenario.policy)
    hours: dict[str, list[float]] = {}
    for split in series.usage:
        totals = hours.setdefault(split.team, [0.0, 0.0])
        for index, steps in enumerate((split.in_guarantee, split.borrowed)):
            times = [*steps.times_s, series.end_s]
            totals[index] += float(np.dot(np.diff(times), steps.values)) / 3600
    for team in result.summary.teams:
        inside, borrowed = hours.get(team.team, [0.0, 0.0])
        assert inside == pytest.approx(team.gpu_hours_in_guarantee)
        assert borrowed == pytest.approx(team.gpu_hours_borrowed)
    assert result.summary.team("nlp").gpu_hours_borrowed > 0


def test_the_queue_is_the_jobs_submitted_and_not_yet_started(replays: list[Replay]) -> None:
    half = replays[1]
    submitted = {e.job: e.t for e in half.result.log if e.decision is Decision.SUBMIT}
    started = {e.job: e.t for e in half.result.log if e.decision is Decision.START}
    assert not any(e.decision is Decision.PREEMPT for e in half.result.log)  # one start each
    queue = half.series.pending
    for at, count in zip(queue.times_s, queue.values, strict=True):
        waiting = [job for job, t in submitted.items() if t <= at and started[job] > at]
        assert count == len(waiting)
    assert max(queue.values) > max(replays[0].series.pending.values) and queue.values[-1] == 0


def test_a_job_requeued_after_its_preemption_waits_again() -> None:
    log = [
        LogEntry(0, Decision.SUBMIT, "a", "nlp"),
        LogEntry(0, Decision.START, "a", "nlp"),
        LogEntry(5, Decision.SUBMIT, "b", "vision"),
        LogEntry(5, Decision.PREEMPT, "a", "nlp"),
        LogEntry(7, Decision.STOPPED, "a", "nlp"),
        LogEntry(7, Decision.START, "b", "vision"),
        LogEntry(9, Decision.CANCEL, "a", "nlp"),
    ]
    assert pending_jobs(log) == Steps((0, 5, 7, 9), (0, 1, 1, 0))


def test_a_run_in_which_nothing_started_still_gives_a_page(
    write_scenario: WriteScenario, tmp_path: Path
) -> None:
    too_big = write_scenario([{"at": 0, "submit": submit("huge", pods=64)}], until_s=600)
    scenario = load_scenario(too_big)
    result = Simulation(scenario).run()
    series = run_series("scenario", result, scenario.policy)
    assert series.waits == {} and series.usage == () and series.pending.values == (1,)
    page = read_page(write_report(tmp_path, [series], source="scenario").read_text())
    assert len(page.images) == 5 and page.tables[0][1][1] == "0 of 1"


def test_the_slow_downs_of_the_runs_that_ended_are_drawn(replays: list[Replay]) -> None:
    ended = LogEntry(0, Decision.FINISH, "a", "nlp")
    started = replace(ended, decision=Decision.START, slowdown=3.0)
    log = [replace(ended, slowdown=1.25), replace(ended, job="b"), started]
    assert slowdowns(log) == (1.25,)
    measured = replace(replays[0].series, slowdowns=(1.0, 1.25, 2.0))
    page = read_page(report_html([measured, replays[1].series], source="trace x"))
    assert NO_COST_MODEL not in page.text and len(page.images) == 8


def test_topoq_simulate_writes_the_report_and_says_where(
    policies: tuple[Path, Path], tmp_path: Path
) -> None:
    whole, half = policies
    directory = tmp_path / "reports" / "itp"
    args = ("simulate", "--trace", ITP, "--policy", whole, "--policy", half, "-o", "json")
    ran = topoq(*args, "--jobs", "2", "--report", directory)
    assert ran.returncode == 0, ran.stderr
    report = directory / REPORT_FILE
    assert f"report: {report}" in ran.stderr.splitlines()
    figures = json.loads(ran.stdout)  # standard output is the document still
    assert [one["policy"] for one in figures] == ["whole.yaml", "half.yaml"]
    page = read_page(report.read_text(encoding="utf-8"))
    rows = {row[0]: row for row in page.tables[0][1:]}
    assert {name: rows[name][1] for name in rows} == {
        one["policy"]: f"{one['completed']} of {one['jobs']}" for one in figures
    }
    assert len(page.images) == 8  # a trace is replayed with the cost model: its slow-downs
    assert NO_COST_MODEL not in page.text


def test_a_scenario_s_report_names_its_run_and_escapes_a_policy_file_s_name(
    policies: tuple[Path, Path], tmp_path: Path
) -> None:
    ran = topoq("simulate", SCENARIOS / "reclaim.yaml", "--report", tmp_path)
    assert ran.returncode == 0, ran.stderr
    page = read_page((tmp_path / REPORT_FILE).read_text(encoding="utf-8"))
    assert [row[0] for row in page.tables[0][1:]] == ["reclaim"]
    assert {row[0] for row in page.tables[1][2:]} == {"nlp", "speech", "vision"}
    hostile = tmp_path / "<script>alert(1)<script>.yaml"
    hostile.write_text(policies[0].read_text())
    ran = topoq("simulate", "--trace", ITP, "--policy", hostile, "--report", tmp_path / "x")
    assert ran.returncode == 0, ran.stderr
    html = (tmp_path / "x" / REPORT_FILE).read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;script&gt;.yaml" in html


def test_a_report_directory_that_is_a_file_is_refused_before_the_run(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    for where in (taken, taken / "below"):
        ran = topoq("simulate", SCENARIOS / "reclaim.yaml", "--report", where)
        assert ran.returncode == 2 and ran.stdout == ""
        assert ran.stderr.startswith(f"error: --report {where}: ") and "Traceback" not in ran.stderr
        assert len(ran.stderr.splitlines()) == 1
    assert taken.read_text() == "not a directory"
