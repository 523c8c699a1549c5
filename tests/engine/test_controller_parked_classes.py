"""A class parked on its team's own figures (ADR 0007 rule 4) through the controller on the
real store: the controller hands the parked class from cycle to cycle, the stored wait stays
while another team's work ends, and the wait is worked out again once the team's own work
ends — as a fresh cycle on the same jobs says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import topoq.engine.controller as controller_module
from tests.core.test_cycle_properties import CLASSES
from topoq.core.cycle import Parking, Snapshot, schedule
from topoq.domain.job import JobPhase
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEventKind
from topoq.store import open_store
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team


def test_a_parked_class_keeps_its_stored_wait_until_its_teams_own_figures_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parkings: list[Parking] = []
    real = controller_module.schedule_with_parking

    def recording(snapshot: Snapshot, parking: Parking | None = None) -> tuple[Any, Parking]:
        result, parked = real(snapshot, parking)
        parkings.append(parked)
        return result, parked

    monkeypatch.setattr(controller_module, "schedule_with_parking", recording)
    nodes, spec = gpu_cluster([1, 2, 4])
    rules = policy(team("a", 32, borrow_gpus=0), team("b", 16), classes=CLASSES)
    with open_store(None, tmp_path) as store:
        store.save_nodes(nodes, actor="t", now=0)
        store.save_policy(rules, actor="t", now=0)
        executor = ScriptedExecutor()
        clock = iter(float(t) for t in range(1, 100))
        c = Controller(store, executor, spec, clock=lambda: next(clock))
        running = (("a-run0", "a", 2), ("a-run1", "a", 2), ("b-run", "b", 1))
        for name, team_name, pods in running:
            c.intake.submit(job(name, team_name, pods, 8, priority="high").spec, actor="alice")
        assert sorted(c.step().started) == ["a-run0", "a-run1", "b-run"]
        for name, _, _ in running:
            executor.report(ExecutorEventKind.STARTED, name)
        c.intake.submit(job("a-head", "a", 3, 8, priority="high").spec, actor="alice")
        c.intake.submit(job("a-later", "a", 2, 4, priority="mid").spec, actor="alice")
        c.step()
        waiting = store.diagnostic("a-later")
        assert waiting is not None and waiting.reason.value == "BORROW_LIMIT_REACHED"
        parked = parkings[-1].carried.parked_classes
        assert len(parked) == 1  # a-later's class, on a's own figures

        executor.report(ExecutorEventKind.EXITED, "b-run", exit_code=0)  # b's figures move
        assert c.step().result.admissions == ()
        assert store.diagnostic("a-later") == waiting
        assert parkings[-1].carried.parked_classes == parked  # taken, not tried again

        executor.report(ExecutorEventKind.EXITED, "a-run1", exit_code=0)  # a's own move
        assert c.step().result.admissions == ()
        later = store.diagnostic("a-later")
        assert later is not None and later.reason.value == "RESERVED_FOR_LARGER_GANG"
        assert store.job("a-head").phase is JobPhase.PENDING  # 16 + 24 > 32: it still waits
        jobs = tuple(store.jobs().values())
        fresh = schedule(
            Snapshot(parkings[-1].snapshot.now, parkings[-1].snapshot.tree, jobs, rules)
        )
        assert {d.job: d.reason for d in fresh.diagnostics}["a-later"] is later.reason
