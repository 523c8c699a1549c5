"""A job held back by its own team's quota hold fails for its team's jobs of the same shape
and time limit at every priority (ADR 0007, "Held back at every priority"): the same
decisions as trying the first job of each priority, with far fewer tries."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES, arrivals, clusters, submit_wave
from topoq.core.cycle import Snapshot, admitting
from topoq.core.cycle.run import run_cycle
from topoq.core.lifecycle import apply_cycle
from topoq.domain.decisions import CycleResult, PendingReason
from topoq.testing.governance import Cluster, job, policy, team


def _decided(result: CycleResult) -> tuple[object, ...]:
    return (result.admissions, result.preemptions, result.requeues, result.cancellations)


def _snapshot(c: Cluster) -> Snapshot:
    return Snapshot(c.now, c.tree, tuple(c.jobs.values()), c.policy)


@settings(max_examples=150, deadline=None)
@given(clusters(), arrivals(), st.data())
def test_held_back_jobs_failing_at_every_priority_decide_what_trying_each_priority_decides(
    c: Cluster, waves: list[list[tuple[str, int, int, str, bool]]], data: st.DataObject
) -> None:
    guard = data.draw(st.sampled_from([0.0, 100.0]))  # starving jobs hold before the order
    c.policy = replace(c.policy, starvation_guard_s=guard)
    count = 0
    for wave in waves:
        count = submit_wave(c, wave, count)
        count = submit_wave(c, wave, count)  # the same shapes again: more held back alike
        snapshot = _snapshot(c)
        shared, _ = run_cycle(snapshot)
        each, _ = run_cycle(snapshot, held_back_across_priorities=False)
        assert _decided(shared) == _decided(each)
        assert {d.job for d in shared.diagnostics} == {d.job for d in each.diagnostics}
        c.jobs = apply_cycle(c.jobs, shared, now=c.now, start_at_once=True, evict_at_once=True)
        running = sorted(c.running())
        for job_id in data.draw(st.lists(st.sampled_from(running), unique=True)) if running else []:
            c.finish(job_id)
        c.now += data.draw(st.sampled_from([0.0, 150.0]))


def _held_back_cluster() -> Cluster:
    """Team a runs 16 of its 24 guaranteed GPUs and its head waits for 16 more, holding its
    team's quota; its later 8-GPU jobs of three priorities would fit but for that hold."""
    c = Cluster.of([1, 2, 4], policy(team("a", 24, borrow_gpus=0), team("b", 40), classes=CLASSES))
    c.submit(job("a-run", "a", 2, 8, priority="high"))  # not preempted for a-head
    c.jobs = apply_cycle(c.jobs, run_cycle(_snapshot(c))[0], now=c.now, start_at_once=True)
    c.now += 1
    c.submit(
        job("a-head", "a", 2, 8, priority="high"),
        *(job(f"a-{cls}-{i}", "a", 1, 8, priority=cls) for cls in CLASSES for i in range(3)),
    )
    return c


def test_a_held_back_job_s_other_priorities_get_no_try_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = _held_back_cluster()
    tried: list[str] = []
    first_try = admitting._first_try

    def counted(cycle, job, job_class):  # type: ignore[no-untyped-def]
        tried.append(job.id)
        return first_try(cycle, job, job_class)

    monkeypatch.setattr(admitting, "_first_try", counted)
    shared, _ = run_cycle(_snapshot(c))
    assert tried == ["a-head", "a-high-0"]  # a-mid-* and a-low-* fail as a-high-0 did
    tried.clear()
    each, _ = run_cycle(_snapshot(c), held_back_across_priorities=False)
    assert tried == ["a-head", "a-high-0", "a-mid-0", "a-low-0"]
    assert shared.admissions == each.admissions == ()
    waits = {d.job: d for d in shared.diagnostics}
    assert waits["a-low-2"].reason is PendingReason.RESERVED_FOR_LARGER_GANG
    assert waits["a-low-2"].message == waits["a-high-0"].message
    assert sorted(shared.diagnostics, key=lambda d: d.job) == sorted(
        each.diagnostics, key=lambda d: d.job
    )


def test_a_starving_job_that_holds_is_still_tried_when_a_job_of_its_shape_was_held_back() -> None:
    """A job that holds what it waits for, and whose turn is still to come, is tried itself:
    what is held for it may admit it. Here the starving job holds its team's quota, which
    holds back the team's later jobs of its shape at a higher priority; it starts."""
    rules = policy(team("a", 16, borrow_gpus=8), team("b", 48), classes=CLASSES)
    c = Cluster.of([1, 2, 4], replace(rules, starvation_guard_s=100.0))
    c.submit(job("a-run", "a", 2, 8, priority="high"), job("b-run", "b", 6, 8, priority="high"))
    c.jobs = apply_cycle(c.jobs, run_cycle(_snapshot(c))[0], now=c.now, start_at_once=True)
    c.submit(job("a-low-old", "a", 1, 8, priority="low"))  # no lender has room: it waits
    assert not run_cycle(_snapshot(c))[0].admissions
    c.now += 200  # it starves; b's work ends, so b lends again
    c.finish("b-run")
    c.submit(job("a-high-new", "a", 1, 8, priority="high"), job("a-mid-new", "a", 1, 8))
    result, _ = run_cycle(_snapshot(c))
    each, _ = run_cycle(_snapshot(c), held_back_across_priorities=False)
    assert _decided(result) == _decided(each)
    assert [a.job for a in result.admissions] == ["a-low-old"]
    held_back = {d.job: d for d in result.diagnostics}["a-high-new"]
    assert "a-low-old" in held_back.message  # held back by the starving job's quota hold
