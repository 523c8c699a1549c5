"""The controller's loop with in-memory ports: intake, cycle, commit, dispatch, outcomes."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from topoq.domain.decisions import CycleResult
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.store import open_store
from topoq.testing.builders import BLOCK
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team

Kind = ExecutorEventKind


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def controller(*teams: object) -> tuple[Controller, MemoryStore, ScriptedExecutor]:
    nodes, spec = gpu_cluster([1, 2, 4])
    store, executor = MemoryStore(), ScriptedExecutor()
    store.save_nodes(nodes, actor="test", now=0)
    store.save_policy(policy(*(teams or (team("a", 32), team("b", 32)))), actor="test", now=0)  # type: ignore[arg-type]
    return Controller(store, executor, spec, clock=Clock()), store, executor


def phase(store: MemoryStore, job_id: str) -> JobPhase:
    return store.job(JobId(job_id)).phase


def test_a_submitted_job_is_admitted_started_and_finished() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 2).spec, actor="alice")
    report = c.step()
    assert report.started == ["j1"] and phase(store, "j1") is JobPhase.ADMITTED
    [launch] = executor.launches
    assert launch.attempt == 1 and len(launch.allocation.nodes) == 2
    assert set(next(iter(launch.node_labels.values()))) == {
        "spine",
        "block",
        "kubernetes.io/hostname",
    }
    executor.report(Kind.STARTED, "j1")
    c.step()
    assert phase(store, "j1") is JobPhase.RUNNING
    executor.report(Kind.EXITED, "j1", exit_code=0)
    c.step()
    assert phase(store, "j1") is JobPhase.SUCCEEDED
    causes = [change.cause for change in store.job(JobId("j1")).history]
    assert causes == ["submitted", "admitted", "started", "every pod exited 0"]
    assert [entry.action for entry in store.audit_log()] == ["submit"]


def test_a_failed_gang_is_retried_up_to_max_retry_then_fails() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 1, max_retry=1).spec, actor="alice")
    for attempt in (1, 2):
        c.step()
        assert executor.launches[-1].attempt == attempt
        executor.report(Kind.STARTED, "j1")
        c.step()
        executor.report(Kind.EXITED, "j1", exit_code=3)
    c.step()
    view = store.job(JobId("j1"))
    assert view.phase is JobPhase.FAILED and view.failures == 1
    assert "retry 1 of 1" in view.history[-4].cause


def preempted_setup() -> tuple[Controller, MemoryStore, ScriptedExecutor, str]:
    """b1 and b2 run on team a's borrowed room; a1 reclaims it: one of them is the victim."""
    c, store, executor = controller(team("a", 32), team("b", 32, borrow_gpus=32))
    c.intake.submit(job("b1", "b", 4).spec, actor="bob")
    c.intake.submit(job("b2", "b", 4).spec, actor="bob")
    c.step()
    for name in ("b1", "b2"):
        executor.report(Kind.STARTED, name)
    c.step()
    c.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="alice")
    report = c.step()
    [victim] = report.stopping
    return c, store, executor, victim


def test_a_victim_keeps_its_room_until_the_executor_reports_it_stopped() -> None:
    c, store, executor, victim = preempted_setup()
    assert executor.stopping == [(JobId(victim), 30)] and executor.cancelled == []
    view = store.job(JobId(victim))
    assert view.phase is JobPhase.PREEMPTING and view.preempted_for == "a1"
    assert view.preemptions == 1 and view.allocation is not None
    for _ in range(3):  # however many cycles run meanwhile, a1 waits and nobody is evicted again
        report = c.step()
        assert not report.result.preemptions and "a1" not in report.started
        [waiting] = [d for d in store.cycles[-1].diagnostics if d.job == "a1"] or [None]
        assert waiting is None or waiting.reason.value == "WAITING_FOR_VICTIMS"
    assert phase(store, "a1") is JobPhase.PENDING and phase(store, victim) is JobPhase.PREEMPTING
    executor.report(Kind.STOPPED, victim)
    report = c.step()
    assert "a1" in report.started
    view = store.job(JobId(victim))
    assert view.phase is JobPhase.PENDING and view.preemptions == 1 and view.allocation is None
    assert view.history[-1].cause == "requeued after preemption: its pods stopped"
    assert executor.stopping == [(JobId(victim), 30)] and executor.cancelled == []


def test_a_victim_that_does_not_stop_is_killed_after_the_grace_period_and_requeued() -> None:
    c, store, executor, victim = preempted_setup()
    since = store.job(JobId(victim)).preempting_since
    assert since is not None
    clock = c.clock
    assert isinstance(clock, Clock)
    c.step()  # a1 waits: nothing changed, so the loop settles ...
    clock.now = since + 30 + 3  # the step reads 34 s: within grace and margin, it still waits
    waiting = c.step()
    assert waiting.settled and waiting.killed == [] and phase(store, victim) is JobPhase.PREEMPTING
    # ... and still the deadline is checked at every step
    report = c.step()  # 35 s: the grace period and the controller's 5 s margin are over
    assert report.killed == [victim] and executor.cancelled == [victim]
    assert phase(store, victim) is JobPhase.PENDING
    assert "had not stopped 30 s after SIGTERM" in store.job(JobId(victim)).history[-1].cause
    assert "a1" in report.started
    executor.report(Kind.STOPPED, victim)  # late: stale, dropped
    c.step()
    assert phase(store, victim) is JobPhase.PENDING


def test_a_victim_cancelled_while_it_stops_is_cancelled_and_its_pods_stopped() -> None:
    c, store, executor, victim = preempted_setup()
    c.intake.cancel(JobId(victim), actor="bob")
    assert phase(store, victim) is JobPhase.CANCELLED
    report = c.step()
    assert executor.cancelled == [victim] and "a1" in report.started


def test_a_pending_job_of_another_team_does_not_take_the_room_a_victim_frees() -> None:
    c, store, executor, victim = preempted_setup()
    c.intake.submit(job("b3", "b", 4, required=BLOCK).spec, actor="bob")
    c.step()
    assert phase(store, "b3") is JobPhase.PENDING
    executor.report(Kind.STOPPED, victim)
    c.step()
    assert phase(store, "a1") is JobPhase.ADMITTED and phase(store, "b3") is JobPhase.PENDING


def test_a_lost_node_requeues_its_gang_and_marks_the_node_failed() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 2).spec, actor="alice")
    c.step()
    executor.report(Kind.STARTED, "j1")
    c.step()
    lost = sorted(executor.launches[0].allocation.nodes)[0]
    c.intake.mark_node(lost, ready=False, actor="admin")
    report = c.step()
    assert report.started == ["j1"]
    assert lost not in executor.launches[-1].allocation.nodes
    assert executor.launches[-1].attempt == 2
    assert not next(n for n in store.nodes() if n.name == lost).ready
    assert executor.failed_nodes == [lost]  # the executor was told once, not every step
    c.step()
    assert executor.failed_nodes == [lost]


def test_a_recovered_node_is_handed_back_to_the_cluster_once() -> None:
    c, store, executor = controller()
    c.step()
    node = store.nodes()[0].name
    c.intake.mark_node(node, ready=False, actor="admin")
    c.step()
    assert executor.failed_nodes == [node] and executor.recovered_nodes == []
    c.intake.mark_node(node, ready=True, actor="admin")
    c.step()
    c.step()
    assert executor.recovered_nodes == [node]  # once, not every step


def test_a_node_removed_while_failed_is_not_recovered() -> None:
    c, store, executor = controller()
    c.step()
    node = store.nodes()[0]
    c.intake.mark_node(node.name, ready=False, actor="admin")
    c.step()
    store.save_nodes([n for n in store.nodes() if n.name != node.name], actor="admin", now=0.0)
    c.step()
    assert executor.recovered_nodes == []


def test_a_drained_node_has_its_gangs_stopped_and_placed_elsewhere() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 2).spec, actor="alice")
    c.step()
    executor.report(Kind.STARTED, "j1")
    c.step()
    node = sorted(executor.launches[0].allocation.nodes)[0]
    assert c.intake.drain(node, actor="admin") == ["j1"]
    assert phase(store, "j1") is JobPhase.PENDING and executor.cancelled == []
    report = c.step()
    assert report.cancelled == ["j1"] and executor.cancelled == ["j1"]
    assert report.started == ["j1"] and node not in executor.launches[-1].allocation.nodes
    assert next(n for n in store.nodes() if n.name == node).unschedulable


def test_pods_of_a_job_that_ended_while_the_controller_was_away_are_stopped() -> None:
    c, _, executor = controller()
    c.intake.submit(job("j1", "a", 1).spec, actor="alice")
    c.intake.submit(job("j2", "a", 1).spec, actor="alice")
    c.step()
    c.intake.cancel(JobId("j1"), actor="alice")
    c.intake.cancel(JobId("j2"), actor="alice")
    assert sorted(c.step().cancelled) == ["j1", "j2"]
    assert c.step().cancelled == [] and sorted(executor.cancelled) == ["j1", "j2"]  # once


def test_events_of_an_earlier_attempt_are_ignored() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 1, max_retry=2).spec, actor="alice")
    c.step()
    executor.report(Kind.STARTED, "j1")
    c.step()
    executor.report(Kind.EXITED, "j1", exit_code=1)
    c.step()  # requeued and admitted again: attempt 2
    stale = executor.launches[0]
    executor.pending.append(
        ExecutorEvent(Kind.EXITED, 0.0, job=stale.job.id, attempt=1, exit_code=0)
    )
    c.step()
    assert phase(store, "j1") is JobPhase.ADMITTED


def test_cancel_hold_and_release_with_clear_errors() -> None:
    c, store, executor = controller()
    c.intake.submit(job("j1", "a", 1).spec, actor="alice")
    c.intake.set_held(JobId("j1"), True, actor="alice")
    assert c.step().started == []
    c.intake.set_held(JobId("j1"), False, actor="alice")
    assert c.step().started == ["j1"]
    c.intake.cancel(JobId("j1"), actor="alice")
    assert phase(store, "j1") is JobPhase.CANCELLED
    assert executor.cancelled == []  # a user's cancel only writes the store ...
    assert c.step().cancelled == ["j1"]  # ... and the controller's next step stops the pods
    assert executor.cancelled == ["j1"]
    with pytest.raises(InvalidInputError, match="already ended cancelled"):
        c.intake.cancel(JobId("j1"), actor="alice")
    with pytest.raises(InvalidInputError, match="only pending jobs"):
        c.intake.set_held(JobId("j1"), True, actor="alice")


def test_a_user_change_that_raced_a_controller_step_is_redone_on_fresh_state(
    tmp_path: Path,
) -> None:
    nodes, spec = gpu_cluster([1, 2, 4])
    with open_store(None, tmp_path) as store:
        store.save_nodes(nodes, actor="t", now=0)
        store.save_policy(policy(team("a", 64)), actor="t", now=0)
        executor = ScriptedExecutor()
        c = Controller(store, executor, spec, clock=Clock())
        c.intake.submit(job("j1", "a", 1).spec, actor="alice")
        real_job = store.job

        def controller_commits_after_the_read(job_id: JobId) -> JobView:
            view = real_job(job_id)
            store.job = real_job  # type: ignore[method-assign]
            step = threading.Thread(target=c.step)  # admits j1: the row's version moves on
            step.start()
            step.join()
            return view

        store.job = controller_commits_after_the_read  # type: ignore[method-assign]
        cancelled = c.intake.cancel(JobId("j1"), actor="bob")
        history = [change.phase for change in store.job(JobId("j1")).history]
        assert cancelled.phase is JobPhase.CANCELLED
        assert history == [JobPhase.PENDING, JobPhase.ADMITTED, JobPhase.CANCELLED]
        assert c.step().cancelled == ["j1"] and executor.cancelled == ["j1"]


def test_recover_requeues_gangs_that_held_capacity_before_a_restart() -> None:
    c, store, _ = controller()
    c.intake.submit(job("j1", "a", 1).spec, actor="alice")
    c.step()
    restarted = Controller(store, ScriptedExecutor(), c.topology, clock=Clock())
    assert restarted.recover() == ["j1"]
    assert phase(store, "j1") is JobPhase.PENDING


def test_recover_requeues_a_victim_that_was_stopping_before_a_restart() -> None:
    c, store, _, victim = preempted_setup()
    restarted = Controller(store, ScriptedExecutor(), c.topology, clock=Clock())
    assert victim in restarted.recover()
    view = store.job(JobId(victim))
    assert view.phase is JobPhase.PENDING and view.allocation is None
    assert view.preempted_for is None and view.preemptions == 1
    assert "a1" in restarted.step().started


def test_a_victim_whose_pods_exit_while_stopping_is_requeued_not_finished() -> None:
    """A trainer that checkpoints on SIGTERM and exits 0 is resumed later, not succeeded."""
    c, store, executor, victim = preempted_setup()
    executor.report(Kind.EXITED, victim, exit_code=0)
    report = c.step()
    view = store.job(JobId(victim))
    assert view.phase is JobPhase.PENDING and view.failures == 0
    assert view.history[-1].cause == "requeued after preemption: its pods exited (0) while stopping"
    assert "a1" in report.started


def test_a_stop_the_executor_failed_to_begin_is_asked_again_at_the_next_step() -> None:
    class StopFailsOnce(ScriptedExecutor):
        failures = 1

        def stop(self, job: JobId, grace_s: float) -> None:
            if self.failures:
                self.failures -= 1
                raise OSError("stop failed (injected)")
            super().stop(job, grace_s)

    c, store, _ = controller(team("a", 32), team("b", 32, borrow_gpus=32))
    executor = StopFailsOnce()
    c.executor = executor
    for name in ("b1", "b2"):
        c.intake.submit(job(name, "b", 4).spec, actor="bob")
    c.step()
    c.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="alice")
    report = c.step()
    assert report.stopping == [] and [e for e in report.executor_errors if "stop b" in e]
    [victim] = [j for j in ("b1", "b2") if phase(store, j) is JobPhase.PREEMPTING]
    assert c.step().stopping == [victim] and executor.stopping == [(JobId(victim), 30)]
    assert phase(store, "a1") is JobPhase.PENDING


def test_a_victim_the_executor_never_agreed_to_stop_is_still_killed_at_the_deadline() -> None:
    class StopAlwaysFails(ScriptedExecutor):
        def stop(self, job: JobId, grace_s: float) -> None:
            raise OSError("stop failed (injected)")

    c, store, _ = controller(team("a", 32), team("b", 32, borrow_gpus=32))
    executor = StopAlwaysFails()
    c.executor = executor
    for name in ("b1", "b2"):
        c.intake.submit(job(name, "b", 4).spec, actor="bob")
    c.step()
    c.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="alice")
    c.step()
    [victim] = [j for j in ("b1", "b2") if phase(store, j) is JobPhase.PREEMPTING]
    clock = c.clock
    assert isinstance(clock, Clock)
    clock.now += 40
    report = c.step()
    assert report.killed == [victim] and executor.cancelled == [victim]
    assert "a1" in report.started


def test_the_grace_period_comes_from_the_policy() -> None:
    c, store, executor = controller(team("a", 32), team("b", 32, borrow_gpus=32))
    rules = store.policy()
    assert rules is not None
    store.save_policy(replace(rules, preemption_grace_s=7), actor="test", now=0)
    for name in ("b1", "b2"):
        c.intake.submit(job(name, "b", 4).spec, actor="bob")
    c.step()
    c.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="alice")
    [victim] = c.step().stopping
    assert executor.stopping == [(JobId(victim), 7)]


def test_on_the_sql_store_a_cycle_that_raced_a_user_is_dropped_then_redone(
    tmp_path: Path,
) -> None:
    nodes, spec = gpu_cluster([1, 2, 4])
    with open_store(None, tmp_path) as store:
        store.save_nodes(nodes, actor="t", now=0)
        store.save_policy(policy(team("a", 64)), actor="t", now=0)
        executor = ScriptedExecutor()
        c = Controller(store, executor, spec, clock=Clock())
        c.intake.submit(job("j1", "a", 1).spec, actor="alice")
        c.intake.submit(job("j2", "a", 1).spec, actor="alice")
        real_save = store.save_jobs

        def user_cancels_first(*args: Any, **kwargs: Any) -> None:
            store.save_jobs = real_save  # type: ignore[method-assign]
            user = threading.Thread(
                target=c.intake.cancel, args=(JobId("j2"),), kwargs={"actor": "bob"}
            )
            user.start()
            user.join()
            real_save(*args, **kwargs)

        store.save_jobs = user_cancels_first  # type: ignore[method-assign]
        report = c.step()
        assert report.conflicted and executor.launches == []
        assert store.job(JobId("j2")).phase is JobPhase.CANCELLED
        assert c.step().started == ["j1"]


def test_a_queue_that_only_waits_costs_no_cycle_until_something_changes() -> None:
    c, store, executor = controller(team("a", 32))
    for name in ("big1", "big2"):  # the second waits: the team's quota holds one
        c.intake.submit(job(name, "a", 4).spec, actor="alice")
    first = c.step()
    assert first.started == ["big1"] and not first.settled
    executor.report(Kind.STARTED, "big1")
    assert not c.step().settled  # an event: the cycle runs
    cycles = len(store.cycles)
    assert any(d.job == "big2" for d in store.cycles[-1].diagnostics)  # why it waits: stored
    waiting = c.step()
    assert waiting.settled and waiting.result == CycleResult() and len(store.cycles) == cycles
    c.intake.cancel(JobId("big1"), actor="alice")
    moved = c.step()
    assert not moved.settled and moved.started == ["big2"]


def test_a_gang_that_ended_by_itself_is_not_reported_as_stopped() -> None:
    c, _, executor = controller()
    c.intake.submit(job("done", "a", 1).spec, actor="alice")
    c.step()
    executor.report(Kind.STARTED, "done")
    c.step()
    executor.report(Kind.EXITED, "done", exit_code=0)
    assert c.step().cancelled == [] and c.step().cancelled == []
    assert executor.cancelled == []
