"""Executor events racing users' changes, on SQLite and PostgreSQL, with real pods: every
event is stored or dropped as stale on purpose, never lost, so no job holds capacity without
pods and every job ends where its last applied change says."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.store.conftest import StoreLocation
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller
from topoq.engine.intake import Intake
from topoq.executors.local import LocalExecutor
from topoq.store import SqlStore
from topoq.testing.governance import gpu_cluster, job, policy, team

GANGS = 64
SHAPE = [2, 4, 8]  # 64 nodes of 8 GPUs: every gang (one whole node) runs at once
TIMEOUT_S = 60.0


def wait_for_go(directory: Path) -> dict[str, tuple[str, ...]]:
    """Every pod waits until the file ``go`` exists, then exits 0: they all exit at once."""
    go = directory / "go"
    return {"workers": ("/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.02; done")}


def test_mass_exits_racing_cancels_lose_no_event(
    store_location: StoreLocation, tmp_path: Path
) -> None:
    nodes, topology = gpu_cluster(SHAPE)
    store, users_store = store_location.open(), store_location.open()  # the API's own store
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 8 * GANGS)), actor="t", now=0)
    executor = LocalExecutor(tmp_path / "runs", stop_grace_s=0.5)
    c = Controller(
        store, executor, topology, clock=time.time, commands=lambda _: wait_for_go(tmp_path)
    )
    names = [f"gang-{n:02d}" for n in range(GANGS)]
    try:
        for name in names:
            c.intake.submit(job(name, "a", 1).spec, actor="alice")
        _step_until(c, lambda: _phases(store, names) == {JobPhase.RUNNING})
        cancelled = _race_cancels_against_exits(c, users_store, names[::2], tmp_path / "go")
        _step_until(c, lambda: not store.jobs())  # every job ends: none holds capacity
        assert all(executor.pids(JobId(name)) == {} for name in names)
        for name in names:
            view = store.job(JobId(name))
            expected = JobPhase.CANCELLED if name in cancelled else JobPhase.SUCCEEDED
            assert view.phase is expected and view.history[-1].phase is expected, name
            assert view.allocation is None
    finally:
        executor.close()
        store.close()
        users_store.close()


def _race_cancels_against_exits(
    c: Controller, users_store: SqlStore, targets: list[str], go: Path
) -> set[str]:
    """Release every pod and, at the same moment, cancel ``targets`` from another store (as
    an API process would) while the controller steps. The cancels that took effect."""
    intake = Intake(users_store, time.time)
    done: set[str] = set()

    def cancel_all() -> None:
        for name in targets:
            try:
                intake.cancel(JobId(name), actor="bob")
                done.add(name)
            except InvalidInputError:
                pass  # it had already succeeded: the user was too late, as told

    user = threading.Thread(target=cancel_all)
    go.touch()
    user.start()
    while user.is_alive():
        _step(c)
    user.join()
    return done


def _phases(store: SqlStore, names: list[str]) -> set[JobPhase]:
    return {store.job(JobId(name)).phase for name in names}


def _step(c: Controller) -> None:
    """One step; a step that fails is dropped and the loop goes on, as the server's does."""
    with contextlib.suppress(Exception):
        c.step()


def _step_until(c: Controller, done: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out: some job never ended"
        _step(c)
        time.sleep(0.01)
