"""No single executor fault wedges the control plane: a gang the executor cannot start fails
alone (START_FAILED, retried per max_retry, its capacity freed) and every other admission of
the cycle starts; a failing cancel or poll loses neither the step nor what it should do.

Real parts throughout: the SQLite store and the local executor running real processes. The
bad environment is the controller's own (``environment=``), so no intake check stands between
it and the executor, as a field the intake misses would not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from topoq.domain.job import JobId, JobPhase, JobSpec, JobView
from topoq.engine.controller import MAX_EVENT_STEPS, Controller
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.executors.local import LocalExecutor
from topoq.store import SqlStore, open_store
from topoq.store.errors import StoreUnavailable
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team

BAD_ENVIRONMENTS = {
    "a name with '='": {"BAD=NAME": "x"},
    "a NUL in a name": {"BAD\0NAME": "x"},
    "a NUL in a value": {"GOOD_NAME": "bad\0value"},
}
SLEEP = {"TOPOQ_SLEEP_S": "30"}


class FlakyExecutor(LocalExecutor):
    """The local executor, with ``cancel`` (and ``cancel_all``) or ``poll`` failing the next
    ``n`` times."""

    cancel_failures = 0
    poll_failures = 0

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        if self.cancel_failures:
            self.cancel_failures -= 1
            raise OSError("cancel failed (injected)")
        super().cancel_all(jobs)

    def poll(self) -> list[ExecutorEvent]:
        if self.poll_failures:
            self.poll_failures -= 1
            raise OSError("poll failed (injected)")
        return super().poll()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    nodes, _ = gpu_cluster([1, 2, 4])  # 8 nodes of 8 GPUs
    with open_store(None, tmp_path / "store") as opened:
        opened.save_nodes(nodes, actor="t", now=0)
        opened.save_policy(policy(team("a", 64)), actor="t", now=0)
        yield opened


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[FlakyExecutor]:
    with FlakyExecutor(tmp_path / "runs", stop_grace_s=0.5) as local:
        yield local


def controller_for(
    store: SqlStore,
    executor: LocalExecutor,
    environment: Callable[[JobSpec], Mapping[str, str]] = lambda _: SLEEP,
) -> Controller:
    _, topology = gpu_cluster([1, 2, 4])
    return Controller(store, executor, topology, clock=time.time, environment=environment)


def bad_for(names: set[str], bad: Mapping[str, str]) -> Callable[[JobSpec], Mapping[str, str]]:
    return lambda spec: SLEEP | (dict(bad) if spec.id in names else {})


def step_until(
    c: Controller, done: Callable[[], bool], timeout_s: float = 20.0, *, advance: bool = True
) -> None:
    """Step (or, without ``advance``, only wait) until ``done``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        if advance:
            c.step()
        time.sleep(0.05)


def _exited(pid: int) -> bool:
    """Whether the process has ended (a zombie not yet reaped counts)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("bad", list(BAD_ENVIRONMENTS.values()), ids=list(BAD_ENVIRONMENTS))
def test_a_gang_that_cannot_start_fails_alone_and_the_others_of_its_cycle_start(
    store: SqlStore, executor: FlakyExecutor, bad: Mapping[str, str]
) -> None:
    c = controller_for(store, executor, bad_for({"bad"}, bad))
    names = ["early", "bad", *(f"good{n}" for n in range(6))]  # 8 whole nodes: all admitted
    for name in names:
        c.intake.submit(job(name, "a", 1).spec, actor="alice")
    report = c.step()
    assert sorted(report.started) == sorted(n for n in names if n != "bad")
    failed = store.job(JobId("bad"))
    assert failed.phase is JobPhase.FAILED and failed.allocation is None
    assert failed.history[-1].cause.startswith("START_FAILED: ")
    assert "retry" not in failed.history[-1].cause  # max_retry 0: no retry
    assert executor.pids(JobId("bad")) == {}
    step_until(c, lambda: all(store.job(JobId(n)).phase is JobPhase.RUNNING for n in names[2:]))
    assert store.job(JobId("early")).phase is JobPhase.RUNNING
    # its node is free again: one more whole-node job fits
    c.intake.submit(job("late", "a", 1).spec, actor="alice")
    assert "late" in c.step().started


def test_a_start_failure_is_retried_per_max_retry_then_fails(
    store: SqlStore, executor: FlakyExecutor
) -> None:
    c = controller_for(store, executor, bad_for({"bad"}, BAD_ENVIRONMENTS["a name with '='"]))
    c.intake.submit(job("bad", "a", 1, max_retry=1).spec, actor="alice")
    c.step()
    retried = store.job(JobId("bad"))
    assert retried.phase is JobPhase.PENDING and retried.failures == 1
    assert retried.history[-1].cause.startswith("START_FAILED: ")
    assert retried.history[-1].cause.endswith("retry 1 of 1")
    c.step()
    failed = store.job(JobId("bad"))
    assert failed.phase is JobPhase.FAILED and failed.attempt == 2
    causes = [change.cause for change in failed.history]
    assert sum(cause.startswith("START_FAILED") for cause in causes) == 2


def test_a_start_failure_not_caused_by_the_job_fails_only_that_gang(
    store: SqlStore, tmp_path: Path
) -> None:
    """The team's folder in the work directory is a file: every start fails, and the
    controller goes on."""
    work_dir = tmp_path / "runs"
    with LocalExecutor(work_dir) as local:
        blocked = work_dir / "a"  # team a's folder
        blocked.write_text("not a directory")
        c = controller_for(store, local)
        c.intake.submit(job("first", "a", 1, max_retry=2).spec, actor="alice")
        c.intake.submit(job("second", "a", 1).spec, actor="alice")
        for _ in range(3):
            c.step()
        assert store.job(JobId("first")).phase is JobPhase.FAILED
        assert store.job(JobId("first")).failures == 2
        second = store.job(JobId("second"))
        assert second.phase is JobPhase.FAILED
        assert "START_FAILED" in second.history[-1].cause
        assert str(blocked) in second.history[-1].cause  # the executor's own message
        assert store.jobs() == {}  # nothing holds capacity


def test_a_failing_cancel_is_retried_and_the_step_goes_on(
    store: SqlStore, executor: FlakyExecutor
) -> None:
    c = controller_for(store, executor)
    c.intake.submit(job("victim", "a", 1).spec, actor="alice")
    step_until(c, lambda: store.job(JobId("victim")).phase is JobPhase.RUNNING)
    c.intake.cancel(JobId("victim"), actor="alice")
    c.intake.submit(job("next", "a", 1, max_retry=3).spec, actor="alice")
    executor.cancel_failures = 1
    report = c.step()  # the cycle runs although the stop failed
    assert [e for e in report.executor_errors if "cancel victim" in e]
    assert report.result.admissions and executor.pids(JobId("victim"))  # its pods still run
    c.step()
    assert executor.pids(JobId("victim")) == {}  # ... until the next step stops them
    step_until(c, lambda: store.job(JobId("next")).phase is JobPhase.RUNNING)


def test_a_failing_poll_loses_neither_the_step_nor_the_events(
    store: SqlStore, executor: FlakyExecutor
) -> None:
    c = controller_for(store, executor, lambda _: {"TOPOQ_SLEEP_S": "0.2"})
    c.intake.submit(job("short", "a", 1).spec, actor="alice")
    c.step()
    pids = list(executor.pids(JobId("short")).values())
    step_until(c, lambda: all(_exited(pid) for pid in pids), advance=False)  # it ended
    executor.poll_failures = 1
    c.intake.submit(job("other", "a", 1).spec, actor="alice")
    report = c.step()
    assert report.executor_errors == [
        "the executor failed to poll: OSError: poll failed (injected)"
    ]
    assert "other" in report.started
    step_until(c, lambda: store.job(JobId("short")).phase is JobPhase.SUCCEEDED)


def test_events_of_a_step_that_failed_are_stored_by_the_next(
    store: SqlStore, executor: FlakyExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = controller_for(store, executor, lambda _: {"TOPOQ_SLEEP_S": "0.2"})
    names = ["one", "two", "three"]
    for name in names:
        c.intake.submit(job(name, "a", 1).spec, actor="alice")
    c.step()
    pids = [pid for name in names for pid in executor.pids(JobId(name)).values()]
    step_until(c, lambda: all(_exited(pid) for pid in pids), advance=False)
    real_save = store.save_jobs

    def database_away(*args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(store, "save_jobs", real_save)
        raise StoreUnavailable("the database is away (injected)")

    monkeypatch.setattr(store, "save_jobs", database_away)
    with pytest.raises(StoreUnavailable):
        c.step()  # the events were polled, none could be stored
    step_until(c, lambda: all(store.job(JobId(n)).phase is JobPhase.SUCCEEDED for n in names))


def test_an_event_that_can_never_be_stored_is_dropped_and_the_later_ones_are_not() -> None:
    class RefusesOneJob(MemoryStore):
        def save_jobs(self, changed: Sequence[JobView], **kwargs: Any) -> None:
            if any(v.id == "poison" and v.phase is JobPhase.RUNNING for v in changed):
                raise ValueError("this job cannot be written (injected)")
            super().save_jobs(changed, **kwargs)

    nodes, topology = gpu_cluster([1, 2, 4])
    memory, scripted = RefusesOneJob(), ScriptedExecutor()
    memory.save_nodes(nodes, actor="t", now=0)
    memory.save_policy(policy(team("a", 64)), actor="t", now=0)
    c = Controller(memory, scripted, topology, clock=time.time)
    for name in ("poison", "other"):
        c.intake.submit(job(name, "a", 1).spec, actor="alice")
    c.step()
    scripted.report(ExecutorEventKind.STARTED, "poison")
    scripted.report(ExecutorEventKind.STARTED, "other")
    for _ in range(MAX_EVENT_STEPS - 1):
        with pytest.raises(ValueError, match="injected"):
            c.step()
        assert memory.job(JobId("other")).phase is JobPhase.ADMITTED  # kept, in order
    report = c.step()
    assert [e for e in report.executor_errors if "dropped an executor event" in e]
    assert memory.job(JobId("other")).phase is JobPhase.RUNNING


def test_an_event_the_domain_refuses_is_dropped_at_once_and_the_cycle_runs() -> None:
    """A lost node that is no longer in the inventory: storing it can never succeed, so it
    does not cost ``MAX_EVENT_STEPS`` steps without a cycle."""
    nodes, topology = gpu_cluster([1, 2, 4])
    memory, scripted = MemoryStore(), ScriptedExecutor()
    memory.save_nodes(nodes, actor="t", now=0)
    memory.save_policy(policy(team("a", 64)), actor="t", now=0)
    c = Controller(memory, scripted, topology, clock=time.time)
    scripted.pending.append(ExecutorEvent(ExecutorEventKind.NODE_LOST, 0.0, node="gone-node"))
    c.intake.submit(job("after", "a", 1).spec, actor="alice")
    report = c.step()
    assert [e for e in report.executor_errors if "gone-node" in e]
    assert memory.job(JobId("after")).phase is JobPhase.ADMITTED  # the cycle ran
