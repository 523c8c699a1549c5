"""The simulator on each example scenario: the governance behaviour, read from the decision log."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from tests.sim.conftest import SCENARIOS, WriteScenario, entries, first, submit
from tests.sim.test_traces import ITP
from topoq.domain.errors import InvalidInputError
from topoq.sim import SimulationResult, run_scenario
from topoq.sim.controlled import ScenarioRun
from topoq.sim.engine import Simulation
from topoq.sim.log import DecisionLog
from topoq.sim.scenario import Scenario, load_scenario
from topoq.sim.traces import read_trace, trace_scenario

BLOCK = "topology.k8s.aws/network-node-layer-2"
HOST = "kubernetes.io/hostname"


@cache
def example(name: str) -> SimulationResult:
    return run_scenario(SCENARIOS / f"{name}.yaml")


def test_reclaim_evicts_borrowed_work_in_one_block_and_the_lender_starts_in_that_cycle() -> None:
    log = example("reclaim").log
    preempts = entries(log, "preempt")
    assert preempts, "no preemption"
    assert {e.reason for e in preempts} == {"PREEMPTED_FOR_RECLAIM"}
    assert {e.for_job for e in preempts} == {"vision-train"}
    assert {e.team for e in preempts} == {"nlp"}
    assert len(preempts) == 4  # nlp borrowed exactly 4 nodes' worth
    wait = first(log, "wait", "vision-train")
    assert (wait.t, wait.reason) == (600, "WAITING_FOR_VICTIMS")
    assert set(wait.victims) == {e.job for e in preempts}
    start = first(log, "start", "vision-train")
    assert start.t == 600  # the follow-up cycle at the same instant
    admit = first(log, "admit", "vision-train")
    assert len(admit.placement[BLOCK]) == 1
    victims_hosts = {
        host for e in preempts for host in first(log, "admit", e.job or "").placement[HOST]
    }
    assert victims_hosts == set(admit.placement[HOST])
    for victim in preempts:
        restarts = [e.t for e in entries(log, "start", victim.job) if e.t > 600]
        assert restarts == [1800]  # back when speech's job ends, from zero


def test_reclaim_summary_counts_preemptions_and_borrowed_hours() -> None:
    summary = example("reclaim").summary
    nlp, vision = summary.team("nlp"), summary.team("vision")
    assert (nlp.preemptions_suffered, nlp.preemptions_caused) == (4, 0)
    assert (vision.preemptions_suffered, vision.preemptions_caused) == (0, 4)
    # nlp borrowed 32 GPUs from 0 to 600 s and from 1800 to 3600 s: 32 × (1/6 + 1/2) h
    assert abs(nlp.gpu_hours_borrowed - 32 * (600 + 1800) / 3600) < 1e-9
    assert vision.gpu_hours_borrowed == 0
    assert nlp.completed == 10


def test_priority_preempts_the_teams_own_most_recent_lower_priority_jobs() -> None:
    log = example("priority").log
    preempts = entries(log, "preempt")
    assert [(e.job, e.reason, e.for_job) for e in preempts] == [
        ("nlp-exp-6", "PREEMPTED_FOR_PRIORITY", "nlp-serve"),
        ("nlp-exp-5", "PREEMPTED_FOR_PRIORITY", "nlp-serve"),
    ]
    assert first(log, "start", "nlp-serve").t == 300
    assert [e.t for e in entries(log, "start", "nlp-exp-6")] == [50, 1500]


def test_a_team_that_never_preempts_its_own_work_waits_instead() -> None:
    log = example("priority").log
    assert not [e for e in entries(log, "preempt") if e.team == "speech"]
    wait = first(log, "wait", "speech-serve")
    assert (wait.t, wait.reason) == (600, "NO_LENDER_HAS_ROOM")
    assert first(log, "start", "speech-serve").t == 1800  # when speech-train ends


def test_dependencies_retries_holds_and_cancellations() -> None:
    result = example("dependencies")
    log = result.log
    assert first(log, "start", "train").t == first(log, "finish", "prep").t == 300
    assert first(log, "start", "eval").t == 900  # after-any: once train ended
    rollback = first(log, "cancel", "rollback")
    assert (rollback.t, rollback.reason) == (900, "DEPENDENCY_UNSATISFIABLE")
    assert "after-failed train: it ended succeeded" in (rollback.message or "")
    assert [(e.t, e.decision) for e in log if e.job == "flaky" and e.decision != "admit"] == [
        (0, "submit"),
        (0, "start"),
        (100, "retry"),
        (100, "start"),
        (200, "fail"),
    ]
    assert first(log, "cancel", "report").t == 200
    assert first(log, "start", "triage").t == 200
    assert [e.decision for e in log if e.job == "second-try" and e.t > 0] == [
        "retry",
        "admit",
        "start",
        "finish",
    ]
    assert first(log, "wait", "sweep").reason == "HELD"
    assert first(log, "start", "sweep").t == 400
    assert first(log, "cancel", "queued").reason == "CANCELLED_BY_USER"
    publish = first(log, "cancel", "publish")
    assert (publish.t, publish.reason) == (50, "DEPENDENCY_UNSATISFIABLE")
    nlp = result.summary.team("nlp")
    assert (nlp.submitted, nlp.completed, nlp.failed, nlp.cancelled) == (11, 6, 1, 4)
    assert not result.left_pending and not result.still_running


def test_a_failed_node_requeues_its_gang_which_restarts_from_zero_elsewhere() -> None:
    log = example("node-failure").log
    assert [(e.t, e.decision, e.node) for e in log if e.node] == [
        (600, "node_failed", "p5-0002"),
        (1200, "node_recovered", "p5-0002"),
    ]
    requeue = first(log, "requeue", "pretrain")
    assert (requeue.t, requeue.reason) == (600, "NODE_FAILED")
    first_admit, second_admit = entries(log, "admit", "pretrain")
    assert "p5-0002" in first_admit.placement[HOST]
    assert second_admit.t == 600
    assert second_admit.placement[BLOCK] != first_admit.placement[BLOCK]
    assert "p5-0002" not in second_admit.placement[HOST]
    assert first(log, "finish", "pretrain").t == 600 + 3600


def test_a_blocked_gang_gets_a_block_held_and_small_jobs_backfill_elsewhere() -> None:
    log = example("starving-gang").log
    held = [e for e in entries(log, "wait", "big-gang") if e.reason == "TOPOLOGY_UNSATISFIABLE"]
    assert held and "holding l1-01/l2-01-01 for it" in (held[0].message or "")
    assert held[0].t == 600
    backfill = first(log, "admit", "small-01")
    assert backfill.t == 600 and backfill.placement[BLOCK] != ("l2-01-01",)
    reserved = [e for e in entries(log, "wait") if e.reason == "RESERVED_FOR_LARGER_GANG"]
    assert reserved, "no small job was kept out of the held block"
    assert first(log, "start", "big-gang").t > 590


def test_wait_entries_are_logged_only_when_the_reason_or_eta_changes() -> None:
    log = example("fair-share").log
    last: dict[str, tuple[str | None, float | None]] = {}
    for entry in log:
        if entry.job is None:
            continue
        if entry.decision == "wait":
            said = (entry.reason, entry.eta)
            assert last.get(entry.job) != said or entry.reason == "WAITING_FOR_VICTIMS"
            last[entry.job] = said
        else:
            last.pop(entry.job, None)


def test_the_same_scenario_gives_the_same_log() -> None:
    for name in ("fair-share", "starving-gang", "dependencies"):
        path = SCENARIOS / f"{name}.yaml"
        assert run_scenario(path).log_lines() == run_scenario(path).log_lines()


def test_until_ends_the_run_and_reports_what_is_still_running(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario(
        [{"at": 0, "submit": submit("long", runtime_s=10_000)}, {"at": 0, "submit": submit("b")}],
        until_s=1000,
    )
    result = run_scenario(path)
    assert result.end_s == 1000
    assert result.still_running == ("long",)
    assert (
        abs(result.summary.team("nlp").gpu_hours_in_guarantee - (8 * 1000 + 8 * 600) / 3600) < 1e-9
    )


def test_jobs_that_can_never_run_end_the_run_with_their_last_diagnostic(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario(
        [
            {"at": 0, "submit": submit("huge", pods=20)},
            {"at": 0, "submit": submit("orphan", team="robotics")},
            {"at": 0, "submit": submit("ok")},
        ],
        cycle_interval_s=10,
    )
    result = run_scenario(path)
    pending = {job.job: job.reason for job in result.left_pending}
    assert pending == {"huge": "NEVER_FITS_CURRENT_POLICY", "orphan": "UNKNOWN_TEAM"}
    assert result.end_s == 600  # ticks stop when nothing else is to come
    assert result.cycles < 70


def test_cancelling_a_running_job_frees_its_nodes_at_once(write_scenario: WriteScenario) -> None:
    path = write_scenario(
        [
            {"at": 0, "submit": submit("hog", team="speech", pods=4, runtime_s=5000)},
            {"at": 0, "submit": submit("next", team="speech", pods=4)},
            {"at": 100, "cancel": "hog"},
            {"at": 200, "cancel": "hog"},
        ]
    )
    result = run_scenario(path)
    log = result.log
    assert first(log, "cancel", "hog").reason == "CANCELLED_BY_USER"
    assert first(log, "start", "next").t == 100
    again = entries(log, "cancel", "hog")[1]
    assert (again.t, again.reason) == (200, "ALREADY_FINISHED")
    speech = result.summary.team("speech")
    assert speech.cancelled == 1
    assert abs(speech.gpu_hours_in_guarantee - 32 * (100 + 600) / 3600) < 1e-9


def test_victims_that_take_time_to_stop_hold_their_gpus_and_the_preemptor_waits() -> None:
    """The reclaim example with a 20 s stop delay: the victims are preempted at 600 s, keep
    their GPUs (and their run) until they stopped at 620 s, and only then does the lender's
    gang start, in the room they freed."""
    scenario = replace(load_scenario(SCENARIOS / "reclaim.yaml"), stop_delay_s=20)
    result = Simulation(scenario).run()
    log = result.log
    preempts = entries(log, "preempt")
    assert len(preempts) == 4 and {e.t for e in preempts} == {600}
    stops = entries(log, "stopped")
    assert sorted((e.t, e.job) for e in stops) == sorted((620, e.job) for e in preempts)
    assert all(e.message == "requeued after preemption: its pods stopped" for e in stops)
    assert first(log, "start", "vision-train").t == 620
    assert not [e for e in entries(log, "admit") if 600 <= e.t < 620]
    nlp = result.summary.team("nlp")
    assert nlp.preemptions_suffered == 4
    assert abs(nlp.gpu_hours_borrowed - 32 * (620 + 1800) / 3600) < 1e-9


def test_a_stop_delay_must_be_a_number_of_seconds(write_scenario: WriteScenario) -> None:
    path = write_scenario([{"at": 0, "submit": submit("a")}], stop_delay_s=-1)
    with pytest.raises(InvalidInputError, match="stop_delay_s"):
        run_scenario(path)


def test_a_gang_requeued_after_a_node_failure_restarts_in_its_own_block() -> None:
    """Its block and another are equally tight after the failure; the nodes it held break the
    tie (without them it would move to l2-01-01)."""
    log = example("restart-in-place").log
    first_admit, second_admit = entries(log, "admit", "g")
    assert first(log, "requeue", "g").reason == "NODE_FAILED"
    assert first_admit.placement[BLOCK] == second_admit.placement[BLOCK] == ("l2-01-02",)
    assert second_admit.t == 900
    assert "p5-0005" not in second_admit.placement[HOST]
    assert first(log, "finish", "g").t == 900 + 3600


def _cycling_always(scenario: Scenario) -> tuple[SimulationResult, int, dict[str, object]]:
    """The run as it was before a step with nothing waiting ran no cycle: its result, its
    cycles and the teams' usage as it ended."""
    driver = ScenarioRun(scenario, DecisionLog())
    controller = driver.controller
    decide = controller._decide

    def cycling(snapshot: Any, report: Any) -> Any:
        controller._cycled_on = None  # as if the tree had changed: the cycle runs
        return decide(snapshot, report)

    controller._decide = cycling  # type: ignore[method-assign]
    driver.run()
    return driver.result(), driver.cycles, dict(driver.fair_share_usage())


@pytest.mark.parametrize(
    "scenario",
    [
        *(load_scenario(SCENARIOS / name) for name in ("usage-history.yaml", "node-failure.yaml")),
        trace_scenario(read_trace(ITP)),  # most of its jobs end while nothing waits
    ],
    ids=["usage-history", "node-failure", "itp-sample"],
)
def test_an_instant_with_nothing_waiting_needs_no_cycle(scenario: Scenario) -> None:
    skipping = Simulation(scenario)
    skipped = skipping.run()
    every, every_cycles, every_usage = _cycling_always(scenario)
    assert skipped.log_lines() == every.log_lines()
    assert skipped.summary == every.summary
    assert skipping.fair_share_usage == every_usage  # usage accrues alike
    assert skipped.cycles <= every_cycles
    if scenario.name.endswith(".csv"):
        # most of its steps: nothing waits (each start reports in a second step)
        assert skipped.cycles <= every_cycles / 2
