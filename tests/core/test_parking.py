"""Parking never changes a decision: ``schedule_with_parking`` carried from cycle to cycle
decides exactly what ``schedule`` decides on the same snapshots (ADR 0007)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES, arrivals, clusters, submit_wave
from topoq.core.cycle import Parking, Snapshot, schedule, schedule_with_parking
from topoq.core.cycle.run import run_cycle
from topoq.core.lifecycle import apply_cycle
from topoq.domain.decisions import CycleResult, Diagnostic
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId, JobPhase
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
            snapshot = _snapshot(c)
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
    snapshot = _snapshot(c)
    first, parking = schedule_with_parking(snapshot)
    again, kept = schedule_with_parking(snapshot, parking)
    assert again is first and kept is parking
    later = Snapshot(c.now + 5, c.tree, snapshot.jobs, c.policy)
    assert schedule_with_parking(later, parking)[0] is first  # no time rule changes by then
    c.jobs = apply_cycle(c.jobs, first, now=c.now, start_at_once=True)
    changed = _snapshot(c)
    assert schedule_with_parking(changed, parking)[0] is not first


def test_time_passing_a_rule_runs_the_cycle_again() -> None:
    c = Cluster.of([1, 2, 4], _policy(guard_s=100))
    c.submit(*(job(f"j{i}", "a", 4, 8, priority="low") for i in range(12)))
    snapshot = _snapshot(c)
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
    first, parking = schedule_with_parking(_snapshot(c))
    c.jobs = apply_cycle(c.jobs, first, now=c.now, start_at_once=True)
    waiting = {d.job: d for d in first.diagnostics}["a3-wait"]  # behind its team's head
    c.submit(job("b-run", "b", 2, 8))  # another team's work changes the books, not the wait
    snapshot = _snapshot(c)
    second, parking = schedule_with_parking(snapshot, parking)
    assert [a.job for a in second.admissions] == ["b-run"]
    kept = {d.job: d for d in second.diagnostics}["a3-wait"]
    assert kept is waiting
    fresh = {d.job: d for d in schedule(snapshot).diagnostics}["a3-wait"]
    assert fresh.reason is kept.reason
    c.jobs = apply_cycle(c.jobs, second, now=c.now, start_at_once=True)
    c.finish("a1-run")  # its quota frees: the wait ends
    third, _ = schedule_with_parking(_snapshot(c), parking)
    assert [a.job for a in third.admissions] == ["a2-head", "a3-wait"]


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_settling_a_team_whose_jobs_left_all_failed_decides_and_says_what_their_turns_would(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        snapshot = _snapshot(c)
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


def _snapshot(c: Cluster) -> Snapshot:
    return Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)


def _side_by_side(
    c: Cluster,
    waves: list[list[tuple[str, int, int, str, bool]]],
    data: st.DataObject,
    dropped: str,
    steps: list[float],
) -> Iterator[tuple[CycleResult, CycleResult]]:
    """Each cycle's result with parking carried from cycle to cycle, beside the result of a
    cycle handed the same carried but for ``dropped`` (a field of ``Carried``, emptied), on
    the same snapshots: waves of jobs, each snapshot one to three times (``steps`` apart),
    work finishing between waves."""
    kept: Parking | None = None
    without: Parking | None = None
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        for _again in range(data.draw(st.integers(1, 3))):
            snapshot = _snapshot(c)
            result, kept = schedule_with_parking(snapshot, kept)
            if without is not None:
                without = replace(without, carried=replace(without.carried, **{dropped: {}}))
            compared, without = schedule_with_parking(snapshot, without)
            yield result, compared
            c.now += data.draw(st.sampled_from(steps))
        c.jobs = apply_cycle(c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_waits_taken_whole_from_the_last_cycle_are_those_worked_out_one_by_one(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    """A team settled again under the same failures takes its jobs' waits whole from the last
    cycle (``SettledWaits``): every diagnostic is the one a cycle that looks at each job gives."""
    for result, looked_at in _side_by_side(c, waves, data, "settled", [0.0, 1.0]):
        assert sorted(result.diagnostics, key=_by_job) == sorted(looked_at.diagnostics, key=_by_job)
        assert result.admissions == looked_at.admissions


def test_a_team_settled_again_takes_its_waits_whole_and_says_what_one_by_one_would() -> None:
    """Team a is at its limit with five jobs of one class waiting; b's work ends between
    cycles, so each cycle runs: a leaves the order settled each time, and from the second
    cycle on its waits are taken whole from the last one."""
    c = Cluster.of([1, 2, 4], policy(team("a", 8, borrow_gpus=0), team("b", 24), classes=CLASSES))
    c.submit(job("a-run", "a", 1, 8), *(job(f"b-run{i}", "b", 1, 8) for i in range(3)))
    c.cycle()
    c.now += 1
    c.submit(*(job(f"a-wait{i}", "a", 1, 8) for i in range(5)))
    whole: Parking | None = None
    one_by_one: Parking | None = None
    for ended in ("b-run0", "b-run1", "b-run2"):
        snapshot = _snapshot(c)
        result, whole = schedule_with_parking(snapshot, whole)
        if one_by_one is not None:
            one_by_one = replace(one_by_one, carried=replace(one_by_one.carried, settled={}))
        looked_at, one_by_one = schedule_with_parking(snapshot, one_by_one)
        assert sorted(result.diagnostics, key=_by_job) == sorted(looked_at.diagnostics, key=_by_job)
        assert {d.job for d in result.diagnostics} >= {f"a-wait{i}" for i in range(5)}
        assert "a" in whole.carried.settled  # a left the order settled
        c.finish(ended)
        c.now += 1


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_classes_parked_on_their_teams_figures_wait_as_a_fresh_first_try_says(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    """A class held back by its team's quota hold and waiting on its team's own figures is
    parked (``ParkedClass``); while a hold of its team binds it and those figures stand, the
    next cycle takes its wait without trying it: every decision and diagnostic is the one a
    cycle that tries every class afresh gives."""
    for result, afresh in _side_by_side(c, waves, data, "parked_classes", [0.0, 1.0, 700.0]):
        assert result.admissions == afresh.admissions
        assert result.preemptions == afresh.preemptions
        assert sorted(result.diagnostics, key=_by_job) == sorted(afresh.diagnostics, key=_by_job)


def test_a_class_waiting_on_its_teams_own_figures_is_not_tried_again_until_they_change() -> None:
    """Team a may not borrow; its head (24 GPUs) waits for quota and holds it, and a later job
    (8 GPUs, another shape) waits behind it, over a's guarantee on a's own usage. b's work
    ending leaves a's figures as they were: the later job's class is not tried again and keeps
    its wait. One of a's own jobs ending changes them while the head still waits: the class is
    tried again, and the later job now waits only for the head's hold."""
    c = Cluster.of([1, 2, 4], policy(team("a", 32, borrow_gpus=0), team("b", 16), classes=CLASSES))
    c.submit(job("a-run0", "a", 2, 8), job("a-run1", "a", 2, 8), job("b-run", "b", 1, 8))
    c.cycle()
    c.now += 1
    c.submit(job("a-head", "a", 3, 8), job("a-later", "a", 2, 4))
    first, parking = schedule_with_parking(_snapshot(c))
    waits = {d.job: d for d in first.diagnostics}
    assert waits["a-later"].reason.value == "BORROW_LIMIT_REACHED"
    (parked,) = parking.carried.parked_classes.values()  # a-later's class
    c.finish("b-run")  # another team's figures change, a's do not
    second, parking = schedule_with_parking(_snapshot(c), parking)
    assert second.admissions == ()
    assert {d.job: d for d in second.diagnostics}["a-later"] is waits["a-later"]
    assert tuple(parking.carried.parked_classes.values()) == (parked,)  # taken, not tried
    c.finish("a-run1")  # a's own usage changes; its head (16 + 24 > 32) still waits
    snapshot = _snapshot(c)
    third, parking = schedule_with_parking(snapshot, parking)
    assert third.admissions == ()
    later = {d.job: d for d in third.diagnostics}["a-later"]
    assert later.reason.value == "RESERVED_FOR_LARGER_GANG"  # it fits but for a-head's hold
    assert later == {d.job: d for d in schedule(snapshot).diagnostics}["a-later"]
    assert parked not in parking.carried.parked_classes.values()


def test_a_parked_class_whose_teams_hold_is_gone_is_tried_and_holds_quota_itself() -> None:
    """a-later waits behind a-head's hold on a's own figures and is parked. a-head is
    cancelled: a-later heads a's queue and is tried again (it now holds a's quota), so that
    a-last, which would fit, waits for it as a fresh cycle says."""
    c = Cluster.of([1, 2, 4], policy(team("a", 16, borrow_gpus=0), team("b", 16), classes=CLASSES))
    c.submit(job("a-run", "a", 1, 8, priority="high"))
    c.cycle()
    c.now += 1
    c.submit(
        job("a-head", "a", 2, 8, priority="high"),
        job("a-later", "a", 4, 4, priority="mid"),
        job("a-last", "a", 1, 4, priority="low"),
    )
    first, parking = schedule_with_parking(_snapshot(c))
    waits = {d.job: d.reason.value for d in first.diagnostics}
    assert waits["a-later"] == "BORROW_LIMIT_REACHED"
    assert waits["a-last"] == "RESERVED_FOR_LARGER_GANG"  # a-head's hold
    assert parking.carried.parked_classes
    c.jobs = {name: view for name, view in c.jobs.items() if name != "a-head"}  # cancelled
    snapshot = _snapshot(c)
    second, _ = schedule_with_parking(snapshot, parking)
    assert second.admissions == () == schedule(snapshot).admissions
    last = {d.job: d for d in second.diagnostics}["a-last"]
    assert last.numbers.get("held_for") == "a-later"


def _guard_passing_next(snapshot: Snapshot) -> float | None:
    """In words: the earliest instant after now at which a ready job (pending, not held, not
    blocked) passes the starvation guard."""
    guard = snapshot.policy.starvation_guard_s
    times = [
        job.entered_queue_at + guard
        for job in snapshot.jobs
        if job.phase is JobPhase.PENDING and not job.held
        if job.entered_queue_at + guard > snapshot.now
    ]
    return min(times, default=None)


@settings(max_examples=60, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_a_parked_cycle_tells_when_a_waiting_job_next_passes_the_starvation_guard(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    """What the controller's settled steps wait for, told by the lineup the cycle kept instead
    of a pass over every job: never later than the first ready job to pass the guard (a job
    that went may still be counted, which only makes a cycle sooner), and exactly that when
    every job the lineup knew is still waiting."""
    c.policy = replace(c.policy, starvation_guard_s=data.draw(st.sampled_from([0.0, 30.0, 600.0])))
    parking: Parking | None = None
    count, admitted = 0, False
    for wave in waves:
        for team_name, pods, gpus, cls, _ in wave:
            c.submit(job(f"j{count}", team_name, pods, gpus, priority=cls))
            count += 1
        snapshot = _snapshot(c)
        result, parking = schedule_with_parking(snapshot, parking)
        told, expected = parking.guard_passes_next(c.now), _guard_passing_next(snapshot)
        if c.policy.starvation_guard_s <= 0 or expected is None:
            assert told is None or told > c.now
        else:
            assert told is not None and c.now < told <= expected
        admitted = admitted or bool(result.admissions)
        if not admitted:
            assert told == expected  # nobody ever left the lineup
        c.jobs = apply_cycle(c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True)
        c.now += data.draw(st.sampled_from([0.0, 5.0, 40.0, 700.0]))


def test_a_parking_handed_back_later_tells_only_guard_passings_after_that_instant() -> None:
    """A shell that gets the last parking back for a later snapshot (the same jobs, no time
    rule due in between) asks when the guard next passes at that later instant: a job that
    went from the lineup, still in its heap, passing the guard in between is not counted —
    else a settled controller would find a rule due at every step and never settle."""
    c = Cluster.of([1, 2, 4], _policy(guard_s=100))
    c.submit(job("first", "a", 16, 8, priority="low"))  # 128 GPUs: more than there are
    c.now = 50.0
    c.submit(job("later", "a", 16, 8, priority="low"))
    c.now = 60.0
    _, parking = schedule_with_parking(_snapshot(c), None)
    assert parking.guard_passes_next(c.now) == 100.0
    del c.jobs[JobId("first")]  # cancelled: it leaves the lineup, not its heap
    c.now = 70.0
    _, parking = schedule_with_parking(_snapshot(c), parking)
    c.now = 120.0  # after "first"'s guard would have passed, before "later"'s
    _, again = schedule_with_parking(_snapshot(c), parking)
    assert again is parking and again.snapshot.now != c.now  # handed back, no cycle
    assert again.guard_passes_next(c.now) == 150.0
