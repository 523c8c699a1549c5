"""Parking never changes a decision: ``schedule_with_parking`` carried from cycle to cycle
decides exactly what ``schedule`` decides on the same snapshots (ADR 0007)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES, arrivals, clusters, submit_wave
from topoq.core.cycle import Parking, Snapshot, schedule, schedule_with_parking
from topoq.core.cycle.run import run_cycle
from topoq.core.lifecycle import apply_cycle
from topoq.domain.decisions import CycleResult, Diagnostic
from topoq.domain.governance import ClusterPolicy
from topoq.testing.builders import BLOCK
from topoq.testing.governance import Cluster, job, policy, team


def decided(result: CycleResult) -> tuple[object, ...]:
    """Everything a cycle decides, and each waiting job's reason (a parked wait keeps its
    message and numbers until its reason changes, ADR 0007)."""
    reasons = sorted((d.job, d.reason.value) for d in result.diagnostics)
    return (result.admissions, result.preemptions, result.requeues, result.cancellations, reasons)


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_parked_cycles_decide_what_fresh_cycles_decide(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    parking: Parking | None = None
    count = 0
    for wave in waves:
        for team_name, pods, gpus, cls, required in wave:
            extra = {"required": BLOCK} if required else {}
            limit = data.draw(st.sampled_from([None, 60.0, 600.0]))
            c.submit(
                job(f"j{count}", team_name, pods, gpus, priority=cls, time_limit=limit, **extra)
            )
            count += 1
        for _again in range(data.draw(st.integers(1, 2))):  # the same snapshot again, too
            snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
            result, parking = schedule_with_parking(snapshot, parking)
            assert decided(result) == decided(schedule(snapshot))
        c.jobs = apply_cycle(c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)  # some work finishes between cycles
        c.now += data.draw(st.sampled_from([0.0, 5.0, 700.0]))


def test_an_unchanged_snapshot_gets_the_last_result_without_a_cycle() -> None:
    c = Cluster.of([1, 2, 4], _policy())
    c.submit(*(job(f"j{i}", "a", 4, 8, priority="low") for i in range(6)))
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    first, parking = schedule_with_parking(snapshot)
    again, kept = schedule_with_parking(snapshot, parking)
    assert again is first and kept is parking
    later = Snapshot(c.now + 5, c.tree, snapshot.jobs, c.policy)
    assert schedule_with_parking(later, parking)[0] is first  # no time rule changes by then
    c.jobs = apply_cycle(c.jobs, first, now=c.now, start_at_once=True)
    changed = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    assert schedule_with_parking(changed, parking)[0] is not first


def test_time_passing_a_rule_runs_the_cycle_again() -> None:
    c = Cluster.of([1, 2, 4], _policy(guard_s=100))
    c.submit(*(job(f"j{i}", "a", 4, 8, priority="low") for i in range(12)))
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    first, parking = schedule_with_parking(snapshot)
    starving = Snapshot(c.now + 100, c.tree, snapshot.jobs, c.policy)
    result, _ = schedule_with_parking(starving, parking)
    assert result is not first
    assert decided(result) == decided(schedule(starving))


def _policy(guard_s: float = 600) -> ClusterPolicy:
    rules = policy(team("a", 32, borrow_gpus=16), team("b", 32), classes=CLASSES)
    return replace(rules, starvation_guard_s=guard_s)


def test_a_wait_that_keeps_its_reason_keeps_its_diagnostic_until_the_reason_changes() -> None:
    c = Cluster.of([1, 2, 4], policy(team("a", 32, borrow_gpus=0), team("b", 32), classes=CLASSES))
    c.submit(job("a1-run", "a", 4, 8), job("a2-head", "a", 1, 8), job("a3-wait", "a", 2, 4))
    first, parking = schedule_with_parking(
        Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    )
    c.jobs = apply_cycle(c.jobs, first, now=c.now, start_at_once=True)
    waiting = {d.job: d for d in first.diagnostics}["a3-wait"]  # behind its team's head
    c.submit(job("b-run", "b", 2, 8))  # another team's work changes the books, not the wait
    snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
    second, parking = schedule_with_parking(snapshot, parking)
    assert [a.job for a in second.admissions] == ["b-run"]
    kept = {d.job: d for d in second.diagnostics}["a3-wait"]
    assert kept is waiting
    fresh = {d.job: d for d in schedule(snapshot).diagnostics}["a3-wait"]
    assert fresh.reason is kept.reason
    c.jobs = apply_cycle(c.jobs, second, now=c.now, start_at_once=True)
    c.finish("a1-run")  # its quota frees: the wait ends
    third, _ = schedule_with_parking(
        Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy), parking
    )
    assert [a.job for a in third.admissions] == ["a2-head", "a3-wait"]


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_settling_a_team_whose_jobs_left_all_failed_decides_and_says_what_their_turns_would(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
        settled, _ = run_cycle(snapshot)
        turn_by_turn, _ = run_cycle(snapshot, settle_teams=False)
        assert settled.admissions == turn_by_turn.admissions
        assert settled.preemptions == turn_by_turn.preemptions
        assert sorted(settled.diagnostics, key=_by_job) == sorted(
            turn_by_turn.diagnostics, key=_by_job
        )
        c.jobs = apply_cycle(c.jobs, settled, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)
        c.now += data.draw(st.sampled_from([0.0, 700.0, 4000.0]))  # jobs come to starve


def _by_job(diagnostic: Diagnostic) -> str:
    return diagnostic.job


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_waits_taken_whole_from_the_last_cycle_are_those_worked_out_one_by_one(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    """A team settled again under the same failures takes its jobs' waits whole from the last
    cycle (``SettledWaits``): every diagnostic is the one a cycle that looks at each job gives."""
    whole: Parking | None = None
    one_by_one: Parking | None = None
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        for _again in range(data.draw(st.integers(1, 3))):
            snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
            result, whole = schedule_with_parking(snapshot, whole)
            if one_by_one is not None:  # the same carried, but no team's waits to take whole
                one_by_one = replace(one_by_one, carried=replace(one_by_one.carried, settled={}))
            looked_at, one_by_one = schedule_with_parking(snapshot, one_by_one)
            assert sorted(result.diagnostics, key=_by_job) == sorted(
                looked_at.diagnostics, key=_by_job
            )
            assert result.admissions == looked_at.admissions
            c.now += data.draw(st.sampled_from([0.0, 1.0]))
        c.jobs = apply_cycle(c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)


def test_a_team_settled_again_takes_its_waits_whole_and_says_what_one_by_one_would() -> None:
    """Team a is at its limit with five jobs of one class waiting; b's work ends between
    cycles, so each cycle runs: a leaves the order settled each time, and from the second
    cycle on its waits are taken whole from the last one."""
    c = Cluster.of([1, 2, 4], policy(team("a", 8, borrow_gpus=0), team("b", 24), classes=CLASSES))
    c.submit(job("a-run", "a", 1, 8), *(job(f"b-run{i}", "b", 1, 8) for i in range(3)))
    c.jobs = apply_cycle(
        c.jobs,
        schedule(Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)),
        now=c.now,
        start_at_once=True,
    )
    c.now += 1
    c.submit(*(job(f"a-wait{i}", "a", 1, 8) for i in range(5)))
    whole: Parking | None = None
    one_by_one: Parking | None = None
    for ended in ("b-run0", "b-run1", "b-run2"):
        snapshot = Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)
        result, whole = schedule_with_parking(snapshot, whole)
        if one_by_one is not None:
            one_by_one = replace(one_by_one, carried=replace(one_by_one.carried, settled={}))
        looked_at, one_by_one = schedule_with_parking(snapshot, one_by_one)
        assert sorted(result.diagnostics, key=_by_job) == sorted(looked_at.diagnostics, key=_by_job)
        assert {d.job for d in result.diagnostics} >= {f"a-wait{i}" for i in range(5)}
        assert "a" in whole.carried.settled  # a left the order settled
        c.finish(ended)
        c.now += 1
