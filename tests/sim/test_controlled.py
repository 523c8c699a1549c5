"""``topoq simulate`` runs scenarios through the real controller on a virtual clock
(``sim.controlled``, ``sim.engine.Simulation``): the simulated executor's reports (starts,
exits with the scenario's codes, stops after the stop delay, lost nodes) drive the
controller's own transitions, and the decision log is written from what its steps stored.

The decision logs are held to golden digests (``golden/decision_logs.json``) recorded from
the simulator's own shell before it was removed (revision c3cf13d), on which the controller's
logs were line for line the same: every shipped example under each placement mode, a trace of
contending gangs and the ITP sample under the cost model, and fair-share-at-scale's first
3,000 s. The one exception, recorded from the controller: ``starving-gang.yaml`` under topoq
and kueue-like placement logs one wait of the big gang an instant sooner, because a server
steps again once the gangs it started report started, and that cycle already sees the reason
change (the simulator's shell saw it at the next instant). Every other entry is the same.

At fair-share-at-scale's t=1,015 s the guard's one hold goes to nlp-0084 (starving from that
instant) on the one free node, so speech-0115, first in fair-share order, fits only in held
nodes and waits, evicting nobody; nlp-0084 is admitted in its turn. The next step, with
nlp-0084 running, holds for vision-0052 instead and evicts nlp-0076 and nlp-0077 for
speech-0115."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.sim.conftest import SCENARIOS, WriteScenario, submit
from topoq.core.cycle import PlacementMode
from topoq.domain.job import Allocation, JobId, JobPhase
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.engine.controller import StepReport
from topoq.engine.ports import ExecutorEventKind, GangLaunch
from topoq.sim import controlled
from topoq.sim.controlled import (
    ControlledRun,
    ScenarioRun,
    run_through_controller,
    simulate_through_controller,
)
from topoq.sim.engine import Simulation, SimulationResult
from topoq.sim.executor import SimulatedExecutor, VirtualClock
from topoq.sim.log import Decision, DecisionLog, Outcome
from topoq.sim.network import NetworkModel, Stage
from topoq.sim.scenario import load_scenario
from topoq.sim.traces import Trace, TraceFormat, TraceJob, cluster_of, read_trace, trace_scenario
from topoq.testing.governance import job

ITP_SAMPLE = Path(__file__).parent / "traces" / "itp-sample.csv"
GOLDEN: dict[str, str] = json.loads(
    (Path(__file__).parent / "golden" / "decision_logs.json").read_text()
)
"""sha256 of each run's log lines, recorded from the simulator's own shell (module docstring)."""
STARTED, EXITED = ExecutorEventKind.STARTED, ExecutorEventKind.EXITED
STOPPED, NODE_LOST = ExecutorEventKind.STOPPED, ExecutorEventKind.NODE_LOST

AGREEING = sorted(
    path.name
    for path in SCENARIOS.glob("*.yaml")
    if path.name not in ("cluster.yaml", "policy.yaml", "fair-share-at-scale.yaml")
)


@pytest.fixture(autouse=True)
def quiet_job_events() -> Iterator[None]:
    """The controller logs every job's end; thousands of lines say nothing here."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def _digest(result: SimulationResult) -> str:
    return hashlib.sha256("\n".join(result.log_lines()).encode()).hexdigest()


def _starts_and_successes(result: SimulationResult) -> tuple[dict[str, list[float]], set[str]]:
    starts: dict[str, list[float]] = {}
    succeeded = set()
    for entry in result.log:
        if entry.decision is Decision.START and entry.job is not None:
            starts.setdefault(entry.job, []).append(entry.t)
        if entry.decision is Decision.FINISH and entry.reason == Outcome.SUCCEEDED.value:
            succeeded.add(str(entry.job))
    return starts, succeeded


def _stored_starts(controlled: ControlledRun) -> dict[str, list[float]]:
    found = {
        job: [change.at_s for change in view.history if change.phase is JobPhase.RUNNING]
        for job, view in controlled.jobs.items()
    }
    return {job: at for job, at in found.items() if at}


@pytest.mark.parametrize("name", AGREEING)
def test_the_log_starts_and_ends_every_job_as_the_store_recorded_it(name: str) -> None:
    """The decision log says what the controller stored: each run's start instant, and which
    jobs succeeded, as the jobs' histories in the store say."""
    scenario = load_scenario(SCENARIOS / name)
    simulated = Simulation(scenario).run()
    controlled = run_through_controller(scenario)
    starts, succeeded = _starts_and_successes(simulated)
    assert _stored_starts(controlled) == starts
    assert {
        job for job, view in controlled.jobs.items() if view.phase is JobPhase.SUCCEEDED
    } == succeeded
    assert controlled.cycles > 0 and controlled.steps >= controlled.cycles


def test_at_scale_the_log_is_the_simulators_own_shells() -> None:
    """The first 3,000 s of fair-share-at-scale, line for line the golden log, and every start
    as the store recorded it (t=1,015 s: speech-0115 starts once the guard's held gang runs)."""
    scenario = load_scenario(SCENARIOS / "fair-share-at-scale.yaml")
    until = 3000.0
    scenario = replace(
        scenario, events=tuple(e for e in scenario.events if e.at_s <= until), until_s=until
    )
    simulated = Simulation(scenario).run()
    starts, _ = _starts_and_successes(simulated)
    assert _stored_starts(run_through_controller(scenario)) == starts
    assert starts["speech-0115"] == [1015.0]
    assert _digest(simulated) == GOLDEN["fair-share-at-scale.yaml until 3000 topoq"]


def test_a_starving_job_the_guard_started_is_not_preempted_for_fair_share() -> None:
    """At t=955 s of fair-share-at-scale, vision-0045 has waited past the 600 s guard and
    starts ahead of speech's job; vision is then above its weighted share. A second cycle at
    that instant (the controller's, once the gang reports started) used to evict it for
    speech's job at once — and the guard took the room back for it in the cycle after."""
    scenario = load_scenario(SCENARIOS / "fair-share-at-scale.yaml")
    controlled = run_through_controller(replace(scenario, until_s=960.0))
    history = controlled.jobs["vision-0045"].history  # type: ignore[index]
    phases = [(change.at_s, change.phase) for change in history]
    assert (955.0, JobPhase.RUNNING) in phases
    assert JobPhase.PREEMPTING not in [phase for _, phase in phases], history


def launch(name: str, runtime_s: float, attempt: int = 1, node: str = "n0") -> GangLaunch:
    view = job(name, "nlp", runtime=runtime_s)
    on_node = {node: Resources({"nvidia.com/gpu": 8})}
    allocation = Allocation(PlacementResult(name, ()), on_node, {})
    return GangLaunch(view.spec, allocation, attempt, node_labels={})


def test_the_simulated_executor_reports_on_the_virtual_clock() -> None:
    clock = VirtualClock(10.0)
    executor = SimulatedExecutor(clock, {JobId("flaky"): (3, 0)}, stop_delay_s=5.0)
    executor.start(launch("flaky", 100.0))
    executor.start(launch("victim", 100.0))
    executor.start(launch("lost", 100.0, node="n1"))
    assert [(e.kind, e.job) for e in executor.poll()] == [
        (STARTED, "flaky"),
        (STARTED, "victim"),
        (STARTED, "lost"),
    ]
    clock.now = 20.0
    executor.stop(JobId("victim"), grace_s=2.0)  # the grace period is shorter than the delay
    executor.fail_node("n1")
    assert executor.next_at() == 20.0
    assert [(e.kind, e.node) for e in executor.poll()] == [(NODE_LOST, "n1")]
    clock.now = 22.0
    assert [(e.kind, e.job) for e in executor.poll()] == [(STOPPED, "victim")]
    clock.now = 110.0
    exited = executor.poll()  # the victim's and the lost gang's exits were dropped
    assert [(e.kind, e.job, e.exit_code) for e in exited] == [(EXITED, "flaky", 3)]
    executor.start(launch("flaky", 100.0, attempt=2))
    clock.now = 210.0
    assert [e.exit_code for e in executor.poll() if e.kind is EXITED] == [0]  # its second code
    assert executor.next_at() is None


def test_every_preemption_makes_room_its_preemptor_takes() -> None:
    """With no stop delay, a preemptor starts the instant its victims stop. A victim search
    that left out the quota the starvation guard held from the preemptor evicted for room the
    held job then took (at t=1,015 s speech-0115's victim's room went to vision-0052); a
    search on the books as the preemptor must see them evicts only what makes it fit."""
    scenario = load_scenario(SCENARIOS / "fair-share-at-scale.yaml")
    controlled = run_through_controller(replace(scenario, until_s=3000.0))
    starts = {
        job: {change.at_s for change in view.history if change.phase is JobPhase.RUNNING}
        for job, view in controlled.jobs.items()
    }
    preemptions = [
        (change.at_s, change.cause.split("so that ")[1].split(" ")[0])
        for view in controlled.jobs.values()
        for change in view.history
        if change.phase is JobPhase.PREEMPTING
    ]
    assert len(preemptions) >= 10
    assert [(at, job) for at, job in preemptions if at not in starts[JobId(job)]] == []


@pytest.mark.parametrize("placement", list(PlacementMode))
@pytest.mark.parametrize("name", AGREEING)
def test_the_decision_log_is_the_golden_one(name: str, placement: PlacementMode) -> None:
    """Each example's log under each placement mode, and the summary and the end state from
    it: the simulator's own shell's, recorded before it was removed (``starving-gang.yaml``
    under topoq and kueue-like placement: the controller's, see the module's docstring)."""
    simulated = Simulation(load_scenario(SCENARIOS / name), None, placement).run()
    assert _digest(simulated) == GOLDEN[f"{name} {placement.value}"]
    pending = {job.job for job in simulated.left_pending}
    assert pending == {
        job for job, phase in _last_phases(simulated).items() if phase is JobPhase.PENDING
    }


def _last_phases(result: SimulationResult) -> dict[JobId, JobPhase]:
    """Each job's phase as its log entries leave it (pending after a submit, a retry, a stop
    or a requeue; running after a start; finished after a finish, fail or cancel)."""
    moves = {
        Decision.SUBMIT: JobPhase.PENDING,
        Decision.RETRY: JobPhase.PENDING,
        Decision.STOPPED: JobPhase.PENDING,
        Decision.REQUEUE: JobPhase.PENDING,
        Decision.START: JobPhase.RUNNING,
        Decision.FINISH: JobPhase.SUCCEEDED,
        Decision.FAIL: JobPhase.FAILED,
        Decision.CANCEL: JobPhase.CANCELLED,
    }
    phases: dict[JobId, JobPhase] = {}
    for entry in result.log:
        if entry.job is not None and entry.decision in moves:
            if entry.decision is Decision.CANCEL and phases.get(entry.job, JobPhase.PENDING) in (
                JobPhase.SUCCEEDED,
                JobPhase.FAILED,
            ):
                continue  # a cancel of a finished job changes nothing
            phases[entry.job] = moves[entry.decision]
    return phases


# --- the cost model, interval steps and progress through the controller --------------------

BLOCK_UPLINKS_4_TO_1 = NetworkModel(stages=(Stage(5.0), Stage(10.0, 4.0), Stage(20.0, 8.0)))
"""Blocks' uplinks oversubscribed 4:1, so that gangs spread over two blocks contend."""

CONTENDING = [
    TraceJob("a", "t", 0.0, 1000.0, 12 * 8, 2),  # 12 nodes: one block
    TraceJob("x", "t", 0.0, 5000.0, 12 * 8, 3),  # 12 nodes: the other block
    TraceJob("b", "t", 1.0, 1000.0, 8 * 8, 4),  # 8 nodes: 4 left in each block, spread
    TraceJob("c", "t", 1100.0, 400.0, 2 * 8, 5),  # spread too: b slows while it runs
    TraceJob("d", "t", 1200.0, 3000.0, 16 * 8, 6),  # waits for room
]


@pytest.mark.parametrize("placement", list(PlacementMode))
def test_under_the_cost_model_the_controller_paces_runs_as_the_golden_log_says(
    placement: PlacementMode,
) -> None:
    """The simulated executor paces each run by its slow-down and moves its end when a gang
    sharing its uplinks starts or stops; the log — every start's slow-down and best span, every
    finish's slow-down over its whole run — is the golden one."""
    trace = Trace("contending", TraceFormat.SYNTHETIC, tuple(CONTENDING), {"t": 32})
    scenario = trace_scenario(trace, cluster_of(32))
    controlled = simulate_through_controller(scenario, placement, BLOCK_UPLINKS_4_TO_1)
    assert _digest(controlled) == GOLDEN[f"contending {placement.value} cost-model"]
    finishes = {e.job: e for e in controlled.log if e.decision is Decision.FINISH}
    assert finishes[JobId("b")].slowdown is not None and finishes[JobId("b")].slowdown > 1.0
    starts = [e for e in controlled.log if e.decision is Decision.START]
    assert all(isinstance(e.slowdown, float) for e in starts)  # a plain float: JSON, compared
    plain = simulate_through_controller(scenario, placement)
    b_ends = {e.job: e.t for e in plain.log if e.decision is Decision.FINISH}
    assert finishes[JobId("b")].t > b_ends[JobId("b")]  # it ran longer than its trace says


def test_the_itp_sample_under_the_cost_model_is_logged_as_the_golden_log_says() -> None:
    scenario = trace_scenario(read_trace(ITP_SAMPLE), cluster_of(32))
    for placement in PlacementMode:
        controlled = simulate_through_controller(scenario, placement, BLOCK_UPLINKS_4_TO_1)
        assert _digest(controlled) == GOLDEN[f"itp-sample {placement.value} cost-model"]


def test_a_scenario_interval_steps_the_controller_while_jobs_wait_and_events_are_to_come(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario(
        [
            {"at": 0, "submit": submit("huge", pods=20)},
            {"at": 0, "submit": submit("ok")},
            {"at": 35, "submit": submit("later")},
        ],
        cycle_interval_s=10,
    )
    scenario = load_scenario(path)
    steps_at: list[float] = []
    driver = ScenarioRun(scenario, DecisionLog())
    step = driver.controller.step

    def stepping() -> StepReport:
        steps_at.append(driver.clock.now)
        return step()

    driver.controller.step = stepping  # type: ignore[method-assign]
    driver.run()
    instants = sorted(set(steps_at))
    # every 10 s while "huge" waits and something is to come: "ok" ends at 600 s, "later" at
    # 635 s, and the step on the interval already due at 640 s is the last
    assert instants == sorted({*(10.0 * k for k in range(65)), 35.0, 635.0})
    result = driver.result()
    assert result.end_s == 640.0
    assert [job.job for job in result.left_pending] == ["huge"]
    starts = {e.job: e.t for e in result.log if e.decision is Decision.START}
    assert starts == {"ok": 0.0, "later": 35.0}


def test_a_long_run_through_the_controller_tells_its_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(controlled, "PROGRESS_EVERY_CYCLES", 10)  # a short run, told often
    scenario = load_scenario(SCENARIOS / "fair-share.yaml")
    told: list[tuple[float, int]] = []
    result = simulate_through_controller(
        scenario, progress=lambda at, cycles: told.append((at, cycles))
    )
    assert result.cycles // 10 - 1 <= len(told) <= result.cycles // 10
    assert len(told) > 3
    assert [at for at, _ in told] == sorted(at for at, _ in told)
    assert all(later - earlier >= 10 for (_, earlier), (_, later) in itertools.pairwise(told))
    assert 0 < told[-1][0] <= result.end_s


def test_a_run_that_does_not_settle_at_an_instant_stops_there_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rather than loop, or end in a traceback: here one step per instant is allowed, and the
    first admission needs a second (its gang reports started)."""
    monkeypatch.setattr(controlled, "MAX_STEPS_PER_INSTANT", 1)
    result = simulate_through_controller(load_scenario(SCENARIOS / "priority.yaml"))
    assert result.end_s == 0.0
    assert any(
        warning.startswith("stopped at 0 s: 1 steps at that instant without settling")
        for warning in result.warnings
    )


def test_a_restarted_run_gets_its_time_limit_from_its_new_start(
    write_scenario: WriteScenario,
) -> None:
    """A 900 s run limited to 800 s loses its node at 600 s and starts again at once: its
    limit counts from the new start, so it is failed at 1,400 s, not at 800 s (the first
    start's) nor never. The controller works a holder's deadline out once per view of it
    (two other runs keep its memo of deadlines from being trimmed meanwhile)."""
    path = write_scenario(
        [
            {"at": 0, "submit": submit("limited", runtime_s=900, time_limit=800)},
            {"at": 0, "submit": submit("other-1", runtime_s=3000)},
            {"at": 0, "submit": submit("other-2", runtime_s=3000)},
            {"at": 600, "fail_node": "p5-0001"},
        ]
    )
    result = Simulation(load_scenario(path)).run()
    limited = [e for e in result.log if e.job == "limited"]
    assert [e.t for e in limited if e.decision is Decision.START] == [0.0, 600.0]
    end = limited[-1]
    assert (end.t, end.decision) == (1400.0, Decision.FAIL), result.log_lines()
    assert "TIME_LIMIT_REACHED" in (end.reason or ""), result.log_lines()
