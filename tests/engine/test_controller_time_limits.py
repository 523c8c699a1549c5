"""Time limits through the controller, with real processes (the local executor): a job that
runs past its limit is stopped and fails with TIME_LIMIT_REACHED; its capacity goes to the
next job."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.engine.test_controller_local import run_until, setup  # noqa: F401 the fixture
from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller
from topoq.executors.local import LocalExecutor
from topoq.testing.fakes import MemoryStore
from topoq.testing.governance import job


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


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


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
