"""The controller driving real processes through the local executor."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from topoq.domain.job import JobId, JobPhase, JobSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.controller import Controller
from topoq.executors.local import LocalExecutor
from topoq.executors.local.layout import attempt_dir, pod_log
from topoq.testing.builders import BLOCK
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


CHECKPOINT_THEN_EXIT = (
    "import signal, sys, time\n"
    "def checkpoint(*_):\n"
    "    time.sleep(1)\n"
    "    print('checkpoint saved', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, checkpoint)\n"
    "print('training', flush=True)\n"
    "time.sleep(60)\n"
)


def gpus_booked_per_node(store: MemoryStore) -> dict[str, int]:
    booked: dict[str, int] = {}
    for view in store.job_rows.values():
        if view.phase.holds_capacity and view.allocation is not None:
            for node, resources in view.allocation.resources_on_node.items():
                booked[node] = booked.get(node, 0) + resources.amount(NVIDIA_GPU)
    return booked


def test_the_preemptor_starts_only_after_its_victim_checkpointed_and_stopped(
    tmp_path: Path,
) -> None:
    """b1 and b2 fill the cluster on borrowed quota; a1 reclaims. The victim gets SIGTERM,
    checkpoints for a second and exits; only then is a1 admitted, into the room it freed.
    At no step does a node carry more GPUs than it has, and the local executor (which refuses
    GPU indices in use) never failed a start."""
    nodes, spec = gpu_cluster([1, 2, 4])
    gpus = {str(node.name): node.allocatable.amount(NVIDIA_GPU) for node in nodes}
    store = MemoryStore()
    store.save_nodes(nodes, actor="t", now=0)
    rules = policy(team("a", 32), team("b", 32, borrow_gpus=32))
    store.save_policy(replace(rules, preemption_grace_s=20), actor="t", now=0)
    trainer = (sys.executable, "-c", CHECKPOINT_THEN_EXIT)
    quick = (sys.executable, "-c", "print('a1 runs')")

    def commands(job: JobSpec) -> dict[str, tuple[str, ...]]:
        return {ps.name: trainer if job.team == "b" else quick for ps in job.workload.pod_sets}

    with LocalExecutor(tmp_path) as executor:
        controller = Controller(store, executor, spec, clock=time.time, commands=commands)
        for name in ("b1", "b2"):
            controller.intake.submit(job(name, "b", 4).spec, actor="bob")
        run_until(controller, store, "b1", JobPhase.RUNNING)
        run_until(controller, store, "b2", JobPhase.RUNNING)

        def training(name: str) -> bool:  # its SIGTERM handler is in place
            pods = attempt_dir(tmp_path, "b", JobId(name), 1)
            logs = [pod_log(pods, rank) for rank in range(4)]
            return all(log.exists() and "training" in log.read_text() for log in logs)

        deadline = time.monotonic() + 20
        while not (training("b1") and training("b2")):  # a slow start is not a checkpoint
            assert time.monotonic() < deadline, "the victims' pods never started training"
            time.sleep(0.05)
        controller.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="alice")
        deadline = time.monotonic() + 20
        while store.job(JobId("a1")).phase is not JobPhase.SUCCEEDED:
            assert time.monotonic() < deadline, store.job(JobId("a1")).history
            report = controller.step()
            assert not report.start_failed and not report.executor_errors
            booked = gpus_booked_per_node(store)
            assert all(booked[node] <= gpus[node] for node in booked), booked
            time.sleep(0.05)
        [victim] = [store.job(JobId(n)) for n in ("b1", "b2") if store.job(JobId(n)).preemptions]
    first = attempt_dir(tmp_path, "b", victim.id, 1)
    assert all("checkpoint saved" in pod_log(first, rank).read_text() for rank in range(4))
    evicted = next(c.at_s for c in victim.history if c.phase is JobPhase.PREEMPTING)
    requeued = next(c for c in victim.history if c.cause.startswith("requeued after preemption"))
    admitted = next(c.at_s for c in store.job(JobId("a1")).history if c.phase is JobPhase.ADMITTED)
    assert requeued.cause == "requeued after preemption: its pods stopped"
    assert evicted + 0.9 <= requeued.at_s <= admitted  # the checkpoint took its second
