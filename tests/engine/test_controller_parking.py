"""The controller hands each cycle what the last stored cycle parked (``Parking``), and none
after a cycle whose decisions were dropped because it raced a user's change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import topoq.engine.controller as controller_module
from topoq.core.cycle import Parking, Snapshot
from topoq.domain.decisions import CycleResult
from topoq.engine.controller import Controller
from topoq.engine.ports import ConcurrentUpdate, ExecutorEventKind
from topoq.store import open_store
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team


def test_a_cycle_gets_the_last_stored_cycles_parking_and_none_after_a_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[Parking | None] = []
    returned: list[Parking] = []
    real = controller_module.schedule_with_parking

    def recording(snapshot: Snapshot, parking: Parking | None = None) -> tuple[CycleResult, Any]:
        handed.append(parking)
        result, parked = real(snapshot, parking)
        returned.append(parked)
        return result, parked

    monkeypatch.setattr(controller_module, "schedule_with_parking", recording)
    nodes, spec = gpu_cluster([1, 2, 4])
    with open_store(None, tmp_path) as store:
        store.save_nodes(nodes, actor="t", now=0)
        store.save_policy(policy(team("a", 64)), actor="t", now=0)
        executor = ScriptedExecutor()
        clock = iter(float(t) for t in range(1, 100))
        c = Controller(store, executor, spec, clock=lambda: next(clock))
        c.intake.submit(job("j1", "a", 1).spec, actor="alice")
        c.intake.submit(job("j2", "a", 1).spec, actor="alice")
        real_save = store.save_jobs

        def raced_once(*args: Any, **kwargs: Any) -> None:
            store.save_jobs = real_save  # type: ignore[method-assign]
            raise ConcurrentUpdate("a user changed a job while the cycle ran")

        store.save_jobs = raced_once  # type: ignore[method-assign]
        assert c.step().conflicted
        assert c.step().started == ["j1", "j2"]
        executor.report(ExecutorEventKind.STARTED, "j1")
        c.step()
    assert handed[0] is None, "the first cycle starts afresh"
    assert handed[1] is None, "after a dropped cycle: afresh again"
    assert handed[2] is returned[1], "then the stored cycle's parking"
    assert len(handed) == 3
