"""The controller hands each cycle what the last stored cycle parked (``Parking``), and none
after a cycle whose decisions were dropped because it raced a user's change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import topoq.engine.controller as controller_module
from tests.engine.sql_controller import sql_controller
from topoq.core.cycle import Parking, Snapshot
from topoq.domain.decisions import CycleResult
from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller, StepDecision
from topoq.engine.ports import ConcurrentUpdate, ExecutorEventKind, GangLaunch
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team


def _record_parkings(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[Parking | None], list[Parking]]:
    """The parking the controller hands each cycle, and the one each cycle returns, as lists
    filled while the test runs."""
    handed: list[Parking | None] = []
    returned: list[Parking] = []
    real = controller_module.schedule_with_parking

    def recording(snapshot: Snapshot, parking: Parking | None = None) -> tuple[CycleResult, Any]:
        handed.append(parking)
        result, parked = real(snapshot, parking)
        returned.append(parked)
        return result, parked

    monkeypatch.setattr(controller_module, "schedule_with_parking", recording)
    return handed, returned


def _race_the_next_save(store: Any) -> None:
    """The store's next ``save_jobs`` fails as if a user changed a job while the cycle ran;
    the ones after it save."""
    real_save = store.save_jobs

    def raced_once(*args: Any, **kwargs: Any) -> None:
        store.save_jobs = real_save
        raise ConcurrentUpdate("a user changed a job while the cycle ran")

    store.save_jobs = raced_once


def test_a_cycle_gets_the_last_stored_cycles_parking_and_none_after_a_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed, returned = _record_parkings(monkeypatch)
    clock = iter(float(t) for t in range(1, 100))
    with sql_controller(tmp_path, lambda: next(clock)) as (c, store, executor):
        c.intake.submit(job("j1", "a", 1).spec, actor="alice")
        c.intake.submit(job("j2", "a", 1).spec, actor="alice")
        c.intake.submit(job("too-big", "a", 8).spec, actor="alice")  # waits: the cycles run
        _race_the_next_save(store)
        assert c.step().conflicted
        assert c.step().started == ["j1", "j2"]
        executor.report(ExecutorEventKind.STARTED, "j1")
        c.step()
    assert handed[0] is None, "the first cycle starts afresh"
    assert handed[1] is None, "after a dropped cycle: afresh again"
    assert handed[2] is returned[1], "then the stored cycle's parking"
    assert len(handed) == 3


def test_a_queue_settles_again_after_a_waiting_job_left_before_its_guard_passed() -> None:
    """The starvation guard's next passing comes from the lineup the last cycle kept, whose
    heap may still hold a job that left: once that job's time is past, the controller takes
    the parked cycle back and settles again (it found the guard due at every step while the
    time asked was the parked cycle's own)."""
    nodes, spec = gpu_cluster([1, 2, 4])
    store, executor, now = MemoryStore(), ScriptedExecutor(), [0.0]
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(
        replace(policy(team("a", 8, borrow_gpus=0)), starvation_guard_s=100),
        actor="t",
        now=0,
    )
    c = Controller(store, executor, spec, clock=lambda: now[0])
    c.intake.submit(job("a-run", "a", 1).spec, actor="alice")  # the team's whole quota
    c.intake.submit(job("w-first", "a", 1).spec, actor="alice")
    assert c.step().started == ["a-run"]
    executor.report(ExecutorEventKind.STARTED, "a-run")
    now[0] = 50.0
    c.intake.submit(job("w-later", "a", 1, at=50.0).spec, actor="alice")
    c.step()
    now[0] = 60.0
    c.intake.cancel(JobId("w-first"), actor="alice")  # its guard would pass at 100
    c.step()
    assert c.step().settled
    now[0] = 120.0  # past "w-first"'s time, before "w-later"'s (150)
    c.step()  # the time "w-first" left behind is due: the parked cycle is taken back
    assert c.step().settled
    assert c.time_rule_due() == 150.0


def test_with_no_job_waiting_a_step_runs_no_cycle_and_keeps_the_parking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cycle with nothing waiting and no node failed could decide nothing: jobs ending on a
    cluster with an empty queue cost no cycle (``StepDecision.NOTHING_WAITS``), and the next
    cycle gets the last one's parking. A node that fails makes the next step cycle, and that
    cycle places its lost gang again."""
    handed, returned = _record_parkings(monkeypatch)
    nodes, spec = gpu_cluster([4, 4, 4])
    store, executor, now = MemoryStore(), ScriptedExecutor(), [0.0]
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 64)), actor="t", now=0)
    c = Controller(store, executor, spec, clock=lambda: now[0])
    for name in ("j1", "j2"):
        c.intake.submit(job(name, "a", 4).spec, actor="alice")
    assert c.step().started == ["j1", "j2"]
    assert len(handed) == 1
    executor.report(ExecutorEventKind.STARTED, "j1")
    executor.report(ExecutorEventKind.STARTED, "j2")
    now[0] = 10.0
    report = c.step()
    assert report.decided_by is StepDecision.NOTHING_WAITS
    assert len(handed) == 1, "nothing waits: no cycle"
    executor.report(ExecutorEventKind.EXITED, "j1", exit_code=0)
    now[0] = 20.0
    assert c.step().decided_by is StepDecision.NOTHING_WAITS
    assert store.job(JobId("j1")).phase is JobPhase.SUCCEEDED
    c.intake.submit(job("j3", "a", 4).spec, actor="alice")
    assert c.step().started == ["j3"]
    assert handed[1] is returned[0], "the next cycle gets the last cycle's parking"
    executor.report(ExecutorEventKind.STARTED, "j3")
    node = next(iter(store.job(JobId("j2")).allocation.nodes))  # type: ignore[union-attr]
    c.intake.mark_node(node, ready=False, actor="admin")
    report = c.step()
    assert report.decided_by is StepDecision.CYCLE, "a failed node: the cycle runs"
    # the executor reported the gang lost (requeued), and the cycle placed it elsewhere
    assert [admit.job for admit in report.result.admissions] == ["j2"]
    assert node not in report.result.admissions[0].allocation.nodes


class _SilentOnLostNodes(ScriptedExecutor):
    """An executor that does not report the gangs of a failed node (as one whose node
    agent died with it): only the cycle, seeing the node failed, requeues them."""

    def fail_node(self, node: str) -> None:
        self.failed_nodes.append(node)


def _one_gang_running_then_its_node_failed() -> tuple[Controller, MemoryStore]:
    """A controller whose one gang, j1, runs with nothing waiting (a step that ran no cycle),
    then has its node marked failed; its executor reports nothing of it."""
    nodes, spec = gpu_cluster([4, 4, 4])
    store, executor, now = MemoryStore(), _SilentOnLostNodes(), [0.0]
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 64)), actor="t", now=0)
    c = Controller(store, executor, spec, clock=lambda: now[0])
    c.intake.submit(job("j1", "a", 4).spec, actor="alice")
    assert c.step().started == ["j1"]
    executor.report(ExecutorEventKind.STARTED, "j1")
    assert c.step().decided_by is StepDecision.NOTHING_WAITS
    node = next(iter(store.job(JobId("j1")).allocation.nodes))  # type: ignore[union-attr]
    c.intake.mark_node(node, ready=False, actor="admin")
    return c, store


def test_with_no_job_waiting_a_node_marked_failed_still_has_its_gang_requeued() -> None:
    c, _ = _one_gang_running_then_its_node_failed()
    report = c.step()
    assert report.decided_by is StepDecision.CYCLE
    assert [requeue.job for requeue in report.result.requeues] == ["j1"]


def test_a_lost_gang_whose_requeue_raced_a_user_is_requeued_at_the_next_step() -> None:
    """The cycle that requeues a failed node's gang raced a user's change, so nothing was
    stored; with nothing waiting, the next step must still cycle (the tree it would skip on is
    that of a cycle whose decisions were stored)."""
    c, store = _one_gang_running_then_its_node_failed()
    _race_the_next_save(store)
    assert c.step().conflicted
    report = c.step()
    assert report.decided_by is StepDecision.CYCLE
    assert [requeue.job for requeue in report.result.requeues] == ["j1"]


def test_a_step_says_when_the_next_one_at_its_instant_would_settle(tmp_path: Path) -> None:
    """``StepReport.settles_next``: after a step that moved no job and stored nothing after
    its cycle, the next step at the same instant takes the settled shortcut; after one that
    started a job, or whose dispatch failed a start (stored after the cycle), it does not."""
    with sql_controller(tmp_path, lambda: 5.0) as (c, store, executor):
        c.intake.submit(job("j1", "a", 1).spec, actor="alice")
        c.intake.submit(job("too-big", "a", 8).spec, actor="alice")
        admitting = c.step()
        assert admitting.started == ["j1"] and not admitting.settles_next
        executor.report(ExecutorEventKind.STARTED, "j1")
        seeing = c.step()  # the report is stored before the cycle, which moves nothing
        assert seeing.events and not seeing.result.admissions and seeing.settles_next
        assert c.step().settled, "the step it spared a shell is the settled shortcut"
        real_start = executor.start

        def refusing(launch: GangLaunch) -> None:
            if launch.job.id == "j2":
                raise RuntimeError("the cluster refused the pods")
            real_start(launch)

        executor.start = refusing  # type: ignore[method-assign]
        c.intake.submit(job("j2", "a", 1).spec, actor="alice")
        failing = c.step()
        assert failing.start_failed == ["j2"] and not failing.settles_next
        after = c.step()
        assert not after.settled, "the start failure was stored after the cycle"
        assert store.job(JobId("j2")).phase is JobPhase.FAILED
