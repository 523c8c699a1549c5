"""Time limits through the controller, with real processes (the local executor): a job that
runs past its limit is stopped and fails with TIME_LIMIT_REACHED; its capacity goes to the
next job."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from tests.engine.test_controller_local import run_until, setup  # noqa: F401 the fixture
from tests.executors.launches import process_alive
from topoq.domain.decisions import Diagnostic, PendingReason
from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller, StepReport
from topoq.executors.local import LocalExecutor
from topoq.testing.fakes import MemoryStore
from topoq.testing.governance import job, policy, team


@pytest.fixture
def sleepy(
    setup: tuple[Controller, MemoryStore, LocalExecutor],  # noqa: F811 the fixture
) -> tuple[Controller, MemoryStore, LocalExecutor]:
    """The local controller's setup (8 nodes, team a guaranteed 64 GPUs), pods sleeping 60 s."""
    controller = setup[0]
    controller.environment = lambda _: {"TOPOQ_SLEEP_S": "60"}
    return setup


def test_a_job_past_its_time_limit_is_stopped_and_fails_and_the_next_one_starts(
    sleepy: tuple[Controller, MemoryStore, LocalExecutor],
) -> None:
    controller, store, executor = sleepy
    controller.intake.submit(job("long", "a", 6, time_limit=1.5).spec, actor="alice")
    controller.intake.submit(job("next", "a", 6).spec, actor="alice")
    run_until(controller, store, "long", JobPhase.RUNNING)
    pids = executor.pids(JobId("long"))
    assert pids
    began = time.time()
    run_until(controller, store, "long", JobPhase.FAILED)
    assert time.time() - began < 10, "stopped at its limit, not after its 60 s sleep"
    failed = store.job(JobId("long"))
    assert failed.history[-1].cause.startswith("TIME_LIMIT_REACHED")
    assert failed.failures == 0 and failed.allocation is None
    run_until(controller, store, "next", JobPhase.RUNNING)  # the capacity was freed
    assert executor.pids(JobId("long")) == {}, "the pods of the failed job were stopped"
    for pid in pids.values():
        assert not process_alive(pid)


def test_the_settled_shortcut_ends_when_a_time_limit_is_due(
    sleepy: tuple[Controller, MemoryStore, LocalExecutor],
) -> None:
    controller, store, _ = sleepy
    controller.intake.submit(job("long", "a", 2, time_limit=1.0).spec, actor="alice")
    controller.intake.submit(job("wide", "a", 7).spec, actor="alice")  # never fits beside it
    run_until(controller, store, "long", JobPhase.RUNNING)
    reports = [controller.step() for _ in range(3)]
    assert reports[-1].settled, "a queue that waits costs no cycle"
    time.sleep(1.1)
    report = controller.step()
    assert report.timed_out == [JobId("long")] and not report.settled
    assert store.job(JobId("long")).phase is JobPhase.FAILED


def diagnostic_of(report: StepReport, job_id: str) -> Diagnostic | None:
    return next((d for d in report.result.diagnostics if d.job == job_id), None)


def test_a_starving_gang_gets_its_hold_through_the_controller_and_short_jobs_backfill(
    sleepy: tuple[Controller, MemoryStore, LocalExecutor],
) -> None:
    """Six of eight nodes run jobs limited to 30 s; a 4-node gang waits. Once it has waited
    past the guard (1 s) the settled controller runs a cycle again: the gang holds capacity
    with an ETA from the fillers' limits, a job without a limit is kept out of the two free
    nodes, and a job limited to 5 s backfills there."""
    controller, store, _ = sleepy
    store.save_policy(
        replace(policy(team("a", 128)), starvation_guard_s=1.0), actor="t", now=time.time()
    )
    for i in range(6):
        controller.intake.submit(job(f"fill-{i}", "a", 1, time_limit=30).spec, actor="alice")
    for i in range(6):
        run_until(controller, store, f"fill-{i}", JobPhase.RUNNING)
    controller.intake.submit(job("gang", "a", 4).spec, actor="alice")
    first = controller.step()
    waiting = diagnostic_of(first, "gang")
    assert waiting is not None and "eta_at" in waiting.numbers, "the team head's ETA"
    assert controller.step().settled
    time.sleep(1.1)
    guarded = controller.step()
    assert not guarded.settled, "the guard's expiry ends the settled shortcut"
    held = diagnostic_of(guarded, "gang")
    ends = sorted((store.job(JobId(f"fill-{i}")).started_at or 0) + 30 for i in range(6))
    # two nodes are free: the gang fits once the second filler reaches its limit
    assert held is not None and held.numbers["eta_at"] == math.ceil(ends[1]), held
    assert held.numbers["eta_at"] == waiting.numbers["eta_at"]
    controller.intake.submit(job("open", "a", 1).spec, actor="alice")
    controller.intake.submit(job("quick", "a", 1, time_limit=5).spec, actor="alice")
    report = controller.step()
    kept = diagnostic_of(report, "open")
    assert kept is not None and kept.reason is PendingReason.RESERVED_FOR_LARGER_GANG
    assert kept.numbers["held_for"] == "gang"
    assert JobId("quick") in report.started
