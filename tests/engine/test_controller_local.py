"""The controller driving real processes through the local executor."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller
from topoq.executors.local import LocalExecutor
from topoq.testing.fakes import MemoryStore
from topoq.testing.governance import gpu_cluster, job, policy, team


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Controller, MemoryStore, LocalExecutor]]:
    nodes, spec = gpu_cluster([1, 2, 4])
    store = MemoryStore()
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 64)), actor="t", now=0)
    executor = LocalExecutor(tmp_path)
    controller = Controller(
        store, executor, spec, clock=time.time, environment=lambda _: {"TOPOQ_SLEEP_S": "0.3"}
    )
    try:
        yield controller, store, executor
    finally:
        executor.close()


def run_until(
    controller: Controller,
    store: MemoryStore,
    job_id: str,
    phase: JobPhase,
    timeout_s: float = 20.0,
) -> None:
    deadline = time.monotonic() + timeout_s
    while store.job(JobId(job_id)).phase is not phase:
        if time.monotonic() > deadline:
            pytest.fail(f"{job_id} is {store.job(JobId(job_id)).phase}, expected {phase}")
        controller.step()
        time.sleep(0.05)


def test_a_gang_runs_as_real_processes_and_succeeds(
    setup: tuple[Controller, MemoryStore, LocalExecutor],
) -> None:
    controller, store, executor = setup
    controller.intake.submit(job("train", "a", 2, gpus=4).spec, actor="alice")
    run_until(controller, store, "train", JobPhase.SUCCEEDED)
    logs = executor.logs(JobId("train"))
    assert "WORLD_SIZE" in logs or "world" in logs.lower()
    assert logs.count("rank") >= 2


def test_a_failed_node_requeues_the_gang_onto_other_nodes(
    setup: tuple[Controller, MemoryStore, LocalExecutor],
) -> None:
    controller, store, _ = setup
    controller.environment = lambda _: {"TOPOQ_SLEEP_S": "30"}
    controller.intake.submit(job("long", "a", 2).spec, actor="alice")
    run_until(controller, store, "long", JobPhase.RUNNING)
    first = store.job(JobId("long")).allocation
    assert first is not None
    lost = sorted(first.nodes)[0]
    controller.intake.mark_node(lost, ready=False, actor="admin")
    deadline = time.monotonic() + 20
    while sum(c.phase is JobPhase.RUNNING for c in store.job(JobId("long")).history) < 2:
        assert time.monotonic() < deadline, store.job(JobId("long")).history
        controller.step()
        time.sleep(0.05)
    second = store.job(JobId("long")).allocation
    assert second is not None and lost not in second.nodes
    history = [change.cause for change in store.job(JobId("long")).history]
    assert any(f"node {lost} was lost" in cause for cause in history)
