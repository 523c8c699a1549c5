"""Arrivals that change nothing wait as their classes failed, without a cycle, and that decides
exactly what a cycle decides (``core.cycle.arrivals``, ADR 0007)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES, arrivals, clusters, submit_wave
from tests.core.test_parking import _by_job, _snapshot, decided
from topoq.core.cycle import Parking, schedule, schedule_with_parking
from topoq.core.lifecycle import apply_cycle
from topoq.domain.decisions import CycleResult
from topoq.domain.governance import ClusterPolicy, QueueingStrategy
from topoq.domain.job import JobId, JobPhase
from topoq.testing.governance import Cluster, job, policy, team

Wave = list[tuple[str, int, int, str, bool]]


def _same(a: CycleResult, b: CycleResult) -> bool:
    return (
        a.admissions == b.admissions
        and a.preemptions == b.preemptions
        and a.requeues == b.requeues
        and a.cancellations == b.cancellations
        and sorted(a.diagnostics, key=_by_job) == sorted(b.diagnostics, key=_by_job)
    )


@settings(max_examples=150, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_arrivals_decide_and_say_what_a_cycle_on_the_same_snapshot_does(
    c: Cluster, waves: list[Wave], data: st.DataObject
) -> None:
    """Waves of jobs, each cycled one to four times: its decisions applied before the next
    cycle, or more jobs arrive first — most alike the ones submitted — at the same instant or
    later (across the starvation guard, some of them).
    With arrivals taken without a cycle, everything decided and every reason is what
    ``schedule`` decides afresh, and every diagnostic is what the same parked cycles give with
    every arrival cycled."""
    c.policy = replace(c.policy, starvation_guard_s=data.draw(st.sampled_from([0.0, 600.0])))
    with_arrivals: Parking | None = None
    cycled: Parking | None = None
    count = 0
    submitted: Wave = []
    for wave in waves:
        count = submit_wave(c, wave, count)
        submitted += wave
        result = None
        for _ in range(data.draw(st.integers(1, 4))):
            snapshot = _snapshot(c)
            result, with_arrivals = schedule_with_parking(snapshot, with_arrivals)
            compared, cycled = schedule_with_parking(snapshot, cycled, arrivals=False)
            assert decided(result) == decided(schedule(snapshot))
            assert _same(result, compared)
            if data.draw(st.booleans()):  # applied, as a shell does before the next cycle
                c.jobs = apply_cycle(
                    c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True
                )
                result = None
            elif submitted:
                waiting = [
                    params
                    for at, params in enumerate(submitted)
                    if c.jobs[JobId(f"j{at}")].phase is JobPhase.PENDING
                ] or submitted
                alike = data.draw(st.lists(st.sampled_from(waiting), min_size=1, max_size=3))
                other = data.draw(arrivals())[0][:1] if data.draw(st.booleans()) else []
                count = submit_wave(c, alike + other, count)
                submitted += alike + other
            c.now += data.draw(st.sampled_from([0.0, 1.0, 5.0, 700.0]))
        if result is not None:
            c.jobs = apply_cycle(c.jobs, result, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)


def _full_team(guard_s: float = 0.0, strict: bool = False) -> Cluster:
    """Team a at its limit (32 GPUs, nothing to borrow) with four 8-GPU jobs waiting."""
    a = team("a", 32, borrow_gpus=0)
    if strict:
        a = replace(a, queueing=QueueingStrategy.STRICT_FIFO)
    rules: ClusterPolicy = replace(
        policy(a, team("b", 32), classes=CLASSES), starvation_guard_s=guard_s
    )
    c = Cluster.of([1, 2, 4], rules)
    c.submit(*(job(f"run{i}", "a", 1, 8) for i in range(4)))
    c.jobs = apply_cycle(c.jobs, schedule(_snapshot(c)), now=c.now, start_at_once=True)
    c.submit(*(job(f"wait{i}", "a", 1, 8) for i in range(4)))
    return c


def test_a_job_alike_the_waiting_ones_waits_as_they_do_without_a_cycle() -> None:
    c = _full_team()
    first, parking = schedule_with_parking(_snapshot(c))
    assert not first.admissions and len(first.diagnostics) == 4
    c.now += 30
    c.submit(job("late", "a", 1, 8))
    snapshot = _snapshot(c)
    second, after = schedule_with_parking(snapshot, parking)
    assert after.carried.lineup is parking.carried.lineup  # no cycle ran
    assert second.diagnostics[:4] == first.diagnostics
    assert all(a is b for a, b in zip(second.diagnostics, first.diagnostics, strict=False))
    late = {d.job: d for d in second.diagnostics}["late"]
    fresh = {d.job: d for d in schedule(snapshot).diagnostics}["late"]
    assert (late.reason, late.message) == (fresh.reason, fresh.message)
    c.finish("run0")  # room for the first waiting job: a cycle, which admits it
    third, _ = schedule_with_parking(_snapshot(c), after)
    assert [a.job for a in third.admissions] == ["wait0"]


def test_a_job_that_may_change_something_gets_a_cycle() -> None:
    """A class not met yet (it may fit), one that goes before jobs that had their turns
    (higher priority), a team that queues strict-fifo, and time passing the starvation
    guard: each runs a cycle, which decides as ``schedule`` does."""
    cases = [
        (_full_team(), job("small", "a", 1, 4), 0.0),  # another shape: tried
        (_full_team(), job("urgent", "a", 1, 8, priority="high"), 0.0),  # ahead of the rest
        (_full_team(strict=True), job("late", "a", 1, 8), 0.0),
        (_full_team(guard_s=600), job("late", "a", 1, 8), 700.0),  # the others starve now
    ]
    for c, arriving, later in cases:
        _, parking = schedule_with_parking(_snapshot(c))
        c.now += later
        c.submit(arriving)
        snapshot = _snapshot(c)
        result, after = schedule_with_parking(snapshot, parking)
        assert after.carried.lineup is not parking.carried.lineup, arriving.id
        assert decided(result) == decided(schedule(snapshot))


def test_a_queue_that_only_grows_is_cycled_once() -> None:
    """A hundred submissions alike, one at a time, to a full team: one cycle; every job's
    reason is the one a cycle gives, and the first end admits the head."""
    c = _full_team()
    _, parking = schedule_with_parking(_snapshot(c))
    lineup = parking.carried.lineup
    for i in range(100):
        c.now += 1
        c.submit(job(f"sweep{i}", "a", 1, 8))
        result, parking = schedule_with_parking(_snapshot(c), parking)
    assert parking.carried.lineup is lineup
    assert decided(result) == decided(schedule(_snapshot(c)))
    assert len(result.diagnostics) == 104
    c.finish("run1")
    result, _ = schedule_with_parking(_snapshot(c), parking)
    assert [a.job for a in result.admissions] == ["wait0"]
    assert decided(result) == decided(schedule(_snapshot(c)))


def test_jobs_passing_the_starvation_guard_behind_the_one_held_for_change_nothing() -> None:
    """Team a may borrow but no lender has room: its first starving job holds quota against
    other teams' borrowing. Later jobs alike arrive, and earlier arrivals pass the guard
    behind that one: no cycle, and what ``schedule`` decides."""
    a, b = team("a", 32, borrow_gpus=32), team("b", 32)
    c = Cluster.of([1, 2, 4], replace(policy(a, b, classes=CLASSES), starvation_guard_s=600))
    c.submit(job("a-run", "a", 4, 8), job("b-run", "b", 4, 8))
    c.jobs = apply_cycle(c.jobs, schedule(_snapshot(c)), now=c.now, start_at_once=True)
    c.submit(*(job(f"wait{i}", "a", 1, 8) for i in range(3)))
    _, parking = schedule_with_parking(_snapshot(c))
    c.now = 700.0  # they starve: a cycle, which holds a's quota for wait0
    result, parking = schedule_with_parking(_snapshot(c), parking)
    assert parking.cycled and parking.carried.guard_passes_after is not None
    for at, name in ((800.0, "late0"), (1500.0, "late1")):  # late0 starves at 1,400
        c.now = at
        c.submit(job(name, "a", 1, 8))
        snapshot = _snapshot(c)
        result, parking = schedule_with_parking(snapshot, parking)
        assert not parking.cycled, name
        assert decided(result) == decided(schedule(snapshot))
    c.now = 1500.0
    c.submit(job("late2", "a", 1, 8, priority="high"))  # goes first: a cycle
    snapshot = _snapshot(c)
    result, parking = schedule_with_parking(snapshot, parking)
    assert parking.cycled
    assert decided(result) == decided(schedule(snapshot))


def test_a_job_passing_the_guard_ahead_of_the_one_held_for_gets_a_cycle() -> None:
    """An urgent job submitted later than the starving ones passes the guard after the cycle
    that held for wait0; it comes first in the guard's order, so the guard holds for it now:
    the next arrival is cycled, and urgent evicts its team's lower-priority work, as cycling
    every arrival decides."""
    a, b = team("a", 32, borrow_gpus=32), team("b", 32)
    c = Cluster.of([1, 2, 4], replace(policy(a, b, classes=CLASSES), starvation_guard_s=600))
    c.submit(job("a-run", "a", 4, 8), job("b-run", "b", 4, 8))
    c.jobs = apply_cycle(c.jobs, schedule(_snapshot(c)), now=c.now, start_at_once=True)
    c.submit(*(job(f"wait{i}", "a", 1, 8) for i in range(3)))
    c.now = 300.0
    c.submit(job("urgent", "a", 1, 8, priority="high"))
    parking: Parking | None = None
    cycled: Parking | None = None
    for at in (300.0, 700.0, 950.0):  # urgent passes the guard at 900
        c.now = at
        if at == 950.0:
            c.submit(job("late", "a", 1, 8))
        snapshot = _snapshot(c)
        result, parking = schedule_with_parking(snapshot, parking)
        compared, cycled = schedule_with_parking(snapshot, cycled, arrivals=False)
        assert _same(result, compared)
    assert parking is not None and parking.cycled
    assert [(p.victim, p.for_job) for p in result.preemptions] == [("a-run", "urgent")]
