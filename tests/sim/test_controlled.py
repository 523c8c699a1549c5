"""A scenario through the real controller on a virtual clock (``sim.controlled``), held
against the simulator's own shell (``sim.engine``) on the same scenario: every shipped example
scenario starts every job at the same instants either way and ends it in the same phase, so
that what ``topoq simulate`` reports is what a server would do. The simulated executor's
reports (starts, exits with the scenario's codes, stops after the stop delay, lost nodes)
drive the controller's own transitions.

The one shipped example left out of the parametrised test is ``fair-share-at-scale.yaml``
(12,000 jobs, minutes through the controller); its first 3,000 s are held alike below. There,
at t=1,015 s, the guard's one hold goes to nlp-0084 (starving from that instant) on the one free
node, so speech-0115, first in fair-share order, fits only in held nodes and waits, evicting
nobody; nlp-0084 is admitted in its turn. A cycle at the same instant with nlp-0084 running holds
for vision-0052 instead and evicts nlp-0076 and nlp-0077 for speech-0115. A server steps again
once the gang reports started; the simulator's shell now runs another cycle after it admits a
job past the guard, so the two agree."""

from __future__ import annotations

import itertools
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
from topoq.sim.controlled import _Driver, run_through_controller, simulate_through_controller
from topoq.sim.engine import Simulation
from topoq.sim.executor import SimulatedExecutor, VirtualClock
from topoq.sim.log import Decision, DecisionLog, Outcome
from topoq.sim.network import NetworkModel, Stage
from topoq.sim.scenario import load_scenario
from topoq.sim.traces import Trace, TraceFormat, TraceJob, cluster_of, read_trace, trace_scenario
from topoq.testing.governance import job

ITP_SAMPLE = Path(__file__).parent / "traces" / "itp-sample.csv"
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


@pytest.mark.parametrize("name", AGREEING)
def test_the_controller_starts_and_ends_every_job_as_the_simulator_does(name: str) -> None:
    scenario = load_scenario(SCENARIOS / name)
    simulated = Simulation(scenario).run()
    controlled = run_through_controller(scenario)

    starts: dict[str, list[float]] = {}
    succeeded = set()
    for entry in simulated.log:
        if entry.decision is Decision.START and entry.job is not None:
            starts.setdefault(entry.job, []).append(entry.t)
        if entry.decision is Decision.FINISH and entry.reason == Outcome.SUCCEEDED.value:
            succeeded.add(entry.job)
    controller_starts = {
        job: [change.at_s for change in view.history if change.phase is JobPhase.RUNNING]
        for job, view in controlled.jobs.items()
    }
    assert {job: at for job, at in controller_starts.items() if at} == starts
    assert {
        job for job, view in controlled.jobs.items() if view.phase is JobPhase.SUCCEEDED
    } == succeeded
    assert controlled.cycles > 0 and controlled.steps >= controlled.cycles


def test_at_scale_the_controller_starts_every_job_as_the_simulator_does() -> None:
    """The first 3,000 s of fair-share-at-scale (the whole run agrees too, at ~3 minutes), job
    by job and line for line in the decision log: after admitting a job past the starvation
    guard the simulator cycles again at the same instant, as a server steps again once the
    gang reports started (t=1,015 s, 1,330 s)."""
    scenario = load_scenario(SCENARIOS / "fair-share-at-scale.yaml")
    until = 3000.0
    scenario = replace(
        scenario, events=tuple(e for e in scenario.events if e.at_s <= until), until_s=until
    )
    simulated = Simulation(scenario).run()
    controlled = run_through_controller(scenario)
    starts: dict[str, list[float]] = {}
    for entry in simulated.log:
        if entry.decision is Decision.START and entry.job is not None:
            starts.setdefault(entry.job, []).append(entry.t)
    controller_starts = {
        job: [change.at_s for change in view.history if change.phase is JobPhase.RUNNING]
        for job, view in controlled.jobs.items()
    }
    assert {job: at for job, at in controller_starts.items() if at} == starts
    assert starts["speech-0115"] == [1015.0]
    logged = simulate_through_controller(scenario)  # and so the whole decision log
    assert logged.log_lines() == simulated.log_lines()
    assert logged.summary == simulated.summary


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
def test_the_decision_log_through_the_controller_is_the_simulators(
    name: str, placement: PlacementMode
) -> None:
    """``simulate_through_controller`` writes ``topoq simulate``'s decision log from what the
    controller's steps stored: line for line the simulator's own on every shipped example but
    one. In ``starving-gang.yaml`` the server steps again at an instant once the gangs it
    started report started, and that cycle finds the big gang's reason already changed (a
    small job admitted in the first cycle took the team's quota); the simulator's shell learns
    it at the next instant. Every other entry — each submission, admission, start, eviction,
    end and every other wait — is the same. So under each placement mode the simulator
    compares (the baselines' placements through the same controller)."""
    scenario = load_scenario(SCENARIOS / name)
    own = Simulation(scenario, None, placement).run()
    controlled = simulate_through_controller(scenario, placement)
    if name != "starving-gang.yaml" or placement is PlacementMode.FIRST_FIT:
        assert controlled.log_lines() == own.log_lines()
        assert controlled.summary == own.summary
    else:
        lines, own_lines = set(controlled.log_lines()), set(own.log_lines())
        moved = {
            (entry.job, entry.reason)
            for entry, line in [
                *zip(controlled.log, controlled.log_lines(), strict=True),
                *zip(own.log, own.log_lines(), strict=True),
            ]
            if (line in lines) != (line in own_lines)
        }
        assert moved == {("big-gang", "NO_LENDER_HAS_ROOM")}  # logged an instant sooner
        assert [e for e in controlled.log if e.decision is not Decision.WAIT] == [
            e for e in own.log if e.decision is not Decision.WAIT
        ]
    assert controlled.left_pending == own.left_pending
    assert controlled.still_running == own.still_running
    assert controlled.end_s == own.end_s


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
def test_under_the_cost_model_the_controller_paces_runs_as_the_simulator_does(
    placement: PlacementMode,
) -> None:
    """The simulated executor paces each run by its slow-down and moves its end when a gang
    sharing its uplinks starts or stops; the log — every start's slow-down and best span, every
    finish's slow-down over its whole run — is the simulator's own."""
    trace = Trace("contending", TraceFormat.SYNTHETIC, tuple(CONTENDING), {"t": 32})
    scenario = trace_scenario(trace, cluster_of(32))
    own = Simulation(scenario, BLOCK_UPLINKS_4_TO_1, placement).run()
    controlled = simulate_through_controller(scenario, placement, BLOCK_UPLINKS_4_TO_1)
    assert controlled.log_lines() == own.log_lines()
    finishes = {e.job: e for e in controlled.log if e.decision is Decision.FINISH}
    assert finishes[JobId("b")].slowdown is not None and finishes[JobId("b")].slowdown > 1.0
    starts = [e for e in controlled.log if e.decision is Decision.START]
    assert all(isinstance(e.slowdown, float) for e in starts)  # a plain float: JSON, compared
    plain = simulate_through_controller(scenario, placement)
    b_ends = {e.job: e.t for e in plain.log if e.decision is Decision.FINISH}
    assert finishes[JobId("b")].t > b_ends[JobId("b")]  # it ran longer than its trace says


def test_the_itp_sample_under_the_cost_model_is_logged_as_the_simulator_logs_it() -> None:
    scenario = trace_scenario(read_trace(ITP_SAMPLE), cluster_of(32))
    for placement in (PlacementMode.TOPOQ, PlacementMode.FIRST_FIT):
        own = Simulation(scenario, BLOCK_UPLINKS_4_TO_1, placement).run()
        controlled = simulate_through_controller(scenario, placement, BLOCK_UPLINKS_4_TO_1)
        assert controlled.log_lines() == own.log_lines()


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
    driver = _Driver(scenario, DecisionLog())
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
    own = Simulation(scenario).run()
    assert result.left_pending == own.left_pending
    assert [e for e in result.log if e.decision is not Decision.WAIT] == [
        e for e in own.log if e.decision is not Decision.WAIT
    ]


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
