"""The controller restarts a gang whose node failed in the block it ran in, when that block
still has room."""

from __future__ import annotations

from tests.engine.test_controller import Clock
from topoq.domain.job import JobId
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEventKind
from topoq.testing.builders import BLOCK
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team

Kind = ExecutorEventKind


def test_a_gang_whose_node_failed_restarts_in_its_block() -> None:
    nodes, spec = gpu_cluster([1, 2, 4])  # b0: n00-n03, b1: n04-n07, 8 GPUs each
    store, executor = MemoryStore(), ScriptedExecutor()
    store.save_nodes(nodes, actor="test", now=0)
    store.save_policy(policy(team("a", 64)), actor="test", now=0)
    c = Controller(store, executor, spec, clock=Clock())
    for spec_ in (job("f", "a", 2).spec, job("h", "a", 1).spec):
        c.intake.submit(spec_, actor="alice")
    c.step()  # f on n00, n01 and h on n02: b0 keeps one free node
    c.intake.submit(job("g", "a", 3, required=BLOCK).spec, actor="alice")
    c.step()
    [first] = [launch for launch in executor.launches if launch.job.id == "g"]
    assert first.allocation.nodes == {"n04", "n05", "n06"}
    for name in ("f", "h", "g"):
        executor.report(Kind.STARTED, name)
    c.step()
    executor.report(Kind.EXITED, "f", exit_code=0)  # b0 now has 3 free nodes, as b1 will
    c.step()
    c.intake.mark_node("n04", ready=False, actor="admin")
    report = c.step()
    assert "g" in report.started
    restart = executor.launches[-1]
    assert restart.job.id == "g" and restart.attempt == 2
    assert restart.allocation.nodes == {"n05", "n06", "n07"}  # b1 again, not the tied b0
    assert store.job(JobId("g")).previous_nodes == {"n04", "n05", "n06"}
