"""Dependencies through the controller, which reads only unfinished jobs from the store: the
upstream job's end phase comes from ``Store.phases_of``, so after-ok, after-any and
after-failed behave as in the simulator — also when the upstream job ended before the
dependent was submitted. On the in-memory store and on the real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEventKind, Store
from topoq.store import open_store
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team

from .test_controller import Clock

Kind = ExecutorEventKind
OK, ANY, FAILED = DependencyKind.AFTER_OK, DependencyKind.AFTER_ANY, DependencyKind.AFTER_FAILED


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    with open_store(None, tmp_path) as sql:
        yield sql


def controller(store: Store) -> tuple[Controller, ScriptedExecutor]:
    nodes, spec = gpu_cluster([1, 2, 4])
    executor = ScriptedExecutor()
    store.save_nodes(nodes, actor="test", now=0)
    store.save_policy(policy(team("a", 64)), actor="test", now=0)
    return Controller(store, executor, spec, clock=Clock()), executor


def submit(c: Controller, name: str, *deps: tuple[DependencyKind, str]) -> None:
    spec = job(name, "a", 1).spec
    dependencies = tuple(Dependency(kind, JobId(upstream)) for kind, upstream in deps)
    c.intake.submit(replace(spec, dependencies=dependencies), actor="alice")


def run_to_end(c: Controller, executor: ScriptedExecutor, name: str, exit_code: int) -> None:
    """Start the job (admitted by the last step) and let it exit with ``exit_code``."""
    executor.report(Kind.STARTED, name)
    c.step()
    executor.report(Kind.EXITED, name, exit_code=exit_code)


def phase(store: Store, name: str) -> JobPhase:
    return store.job(JobId(name)).phase


def test_after_ok_starts_once_prep_succeeded_and_is_not_cancelled(store: Store) -> None:
    c, executor = controller(store)
    submit(c, "prep")
    submit(c, "train", (OK, "prep"))
    report = c.step()
    assert report.started == ["prep"] and phase(store, "train") is JobPhase.PENDING
    assert store.job(JobId("train")).history[-1].cause == "submitted"
    run_to_end(c, executor, "prep", 0)
    report = c.step()  # prep succeeds and leaves the unfinished jobs; train starts
    assert phase(store, "prep") is JobPhase.SUCCEEDED
    assert report.started == ["train"] and not report.result.cancellations
    assert phase(store, "train") is JobPhase.ADMITTED


@pytest.mark.parametrize(
    ("kind", "exit_code", "started"),
    [(OK, 3, False), (FAILED, 3, True), (FAILED, 0, False), (ANY, 0, True), (ANY, 3, True)],
)
def test_each_kind_follows_how_the_upstream_job_ended(
    store: Store, kind: DependencyKind, exit_code: int, started: bool
) -> None:
    c, executor = controller(store)
    submit(c, "prep")
    submit(c, "next", (kind, "prep"))
    c.step()
    run_to_end(c, executor, "prep", exit_code)
    report = c.step()
    if started:
        assert report.started == ["next"]
    else:
        view = store.job(JobId("next"))
        assert view.phase is JobPhase.CANCELLED
        ended = "succeeded" if exit_code == 0 else "failed"
        assert view.history[-1].cause.startswith(f"dependency {kind.value} prep: it ended {ended}")


@pytest.mark.parametrize(("exit_code", "started"), [(0, True), (3, False)])
def test_an_upstream_job_that_ended_before_the_dependent_was_submitted_counts(
    store: Store, exit_code: int, started: bool
) -> None:
    c, executor = controller(store)
    submit(c, "prep")
    c.step()
    run_to_end(c, executor, "prep", exit_code)
    c.step()
    assert phase(store, "prep").finished
    submit(c, "train", (OK, "prep"))
    report = c.step()
    assert report.started == (["train"] if started else [])
    assert phase(store, "train") is (JobPhase.ADMITTED if started else JobPhase.CANCELLED)


def test_a_dependency_on_an_id_the_store_never_saw_cancels_with_a_clear_message(
    store: Store,
) -> None:
    """Only jobs stored before submission checked their upstream ids can have one."""
    c, _ = controller(store)
    submit(c, "orphan", (OK, "never-submitted"))
    c.step()
    view = store.job(JobId("orphan"))
    assert view.phase is JobPhase.CANCELLED
    assert view.history[-1].cause == "dependency after-ok never-submitted: no such job"


def test_a_chain_runs_in_order_across_steps(store: Store) -> None:
    c, executor = controller(store)
    submit(c, "one")
    submit(c, "two", (OK, "one"))
    submit(c, "three", (OK, "two"), (ANY, "one"))
    assert c.step().started == ["one"]
    run_to_end(c, executor, "one", 0)
    assert c.step().started == ["two"]
    run_to_end(c, executor, "two", 0)
    assert c.step().started == ["three"]
