"""The server log's events as the controller and the intake write them: one per stored move
(admitted, preempted, requeued, started, ended), per node marked and per inventory change,
and nothing for a cycle whose decisions were not stored."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.engine.test_controller import Kind, controller, preempted_setup
from topoq.domain.job import JobId
from topoq.engine.event_log import EVENT_ATTRIBUTE, FIELDS_ATTRIBUTE, inventory_changed, level_span
from topoq.engine.ports import ConcurrentUpdate
from topoq.testing.governance import gpu_cluster, job, team


def events(caplog: pytest.LogCaptureFixture, name: str | None = None) -> list[dict[str, Any]]:
    """The events logged so far (each its fields and ``event``), of one name when given."""
    found = [
        {"event": getattr(record, EVENT_ATTRIBUTE), "level": record.levelname}
        | getattr(record, FIELDS_ATTRIBUTE)
        for record in caplog.records
        if hasattr(record, EVENT_ATTRIBUTE)
    ]
    return [event for event in found if name is None or event["event"] == name]


@pytest.fixture(autouse=True)
def capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="topoq")


def test_an_admission_names_job_team_priority_gpus_nodes_and_span(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, store, _ = controller()
    c.intake.submit(job("j1", "a", 2).spec, actor="alice")
    c.step()
    [admitted] = events(caplog, "admitted")
    assert admitted["job"] == "j1" and admitted["team"] == "a"
    assert admitted["gpus"] == 16 and admitted["nodes"] == 2 and admitted["attempt"] == 1
    assert isinstance(admitted["priority"], int) and admitted["borrowed"] is False
    view = store.job(JobId("j1"))
    assert view.allocation is not None
    assert admitted["span"] == {"spine": 1, "block": 1, "hostname": 2}


def test_a_run_logs_its_start_and_its_end_with_the_exit_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, _, executor = controller()
    c.intake.submit(job("j1", "a", 1, max_retry=1).spec, actor="alice")
    c.step()
    executor.report(Kind.STARTED, "j1")
    c.step()
    executor.report(Kind.EXITED, "j1", exit_code=3)  # a retry left: requeued
    c.step()
    executor.report(Kind.STARTED, "j1")
    c.step()
    executor.report(Kind.EXITED, "j1", exit_code=4)
    c.step()
    assert [e["event"] for e in events(caplog)] == [
        "admitted", "job_started", "requeued", "admitted", "job_started", "job_ended",
    ]  # fmt: skip
    [requeued] = events(caplog, "requeued")
    assert requeued["job"] == "j1" and "a pod exited 3" in requeued["cause"]
    [ended] = events(caplog, "job_ended")
    assert ended["outcome"] == "failed" and ended["exit_code"] == 4
    assert ended["level"] == "WARNING" and ended["attempt"] == 2


def test_a_preemption_names_victim_preemptor_their_teams_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, _, executor, victim = preempted_setup()
    [preempted] = events(caplog, "preempted")
    assert preempted["victim"] == victim and preempted["victim_team"] == "b"
    assert preempted["preemptor"] == "a1" and preempted["preemptor_team"] == "a"
    assert preempted["reason"] == "PREEMPTED_FOR_RECLAIM" and preempted["cause"]
    executor.report(Kind.STOPPED, victim)
    c.step()
    [requeued] = events(caplog, "requeued")
    assert requeued["job"] == victim
    assert requeued["cause"] == "requeued after preemption: its pods stopped"
    assert events(caplog, "admitted")[-1]["job"] == "a1"


def test_a_cycle_whose_decisions_were_not_stored_logs_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, store, _ = controller()
    c.intake.submit(job("j1", "a", 2).spec, actor="alice")

    def raced(*args: object, **kwargs: object) -> None:
        raise ConcurrentUpdate("a user changed j1")

    monkeypatch.setattr(store, "save_jobs", raced)
    assert c.step().conflicted
    assert events(caplog, "admitted") == []


def test_node_marks_drains_and_cancels_are_logged_with_who(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, store, _ = controller(team("a", 64))
    c.intake.submit(job("j1", "a", 1).spec, actor="alice")
    c.step()
    node = next(iter(store.job(JobId("j1")).allocation.nodes))  # type: ignore[union-attr]  # admitted
    other = next(n.name for n in store.nodes() if n.name != node)
    c.intake.mark_node(other, unschedulable=True, actor="ops")
    c.intake.mark_node(other, unschedulable=False, actor="ops")
    c.intake.mark_node(other, ready=False, actor="ops")
    c.intake.mark_node(other, ready=True, actor="ops")
    c.intake.drain(node, actor="ops")
    c.intake.submit(job("j2", "a", 1).spec, actor="alice")
    c.intake.cancel(JobId("j2"), actor="alice")
    names = [e["event"] for e in events(caplog) if e["event"] != "admitted"]
    assert names == [
        "node_cordoned", "node_uncordoned", "node_failed", "node_recovered",
        "node_drained", "requeued", "job_ended",
    ]  # fmt: skip
    failed = events(caplog, "node_failed")[0]
    assert failed["node"] == other and failed["actor"] == "ops" and failed["level"] == "WARNING"
    [drained] = events(caplog, "node_drained")
    assert drained["requeued"] == ["j1"] and drained["actor"] == "ops"
    [ended] = events(caplog, "job_ended")
    assert ended["outcome"] == "cancelled" and ended["cause"] == "cancelled by alice"


def test_an_inventory_change_counts_what_was_added_removed_and_changed() -> None:
    nodes, _ = gpu_cluster([1, 1, 3])
    first, second, third = nodes
    cordoned = type(second)(**{**vars(second), "unschedulable": True})
    change = inventory_changed([first, second], [cordoned, third])
    assert change is not None and change.name == "inventory_changed"
    assert dict(change.fields) | {"names": list(change.fields["names"])} == {  # type: ignore[arg-type]  # a list
        "nodes": 2,
        "added": 1,
        "removed": 1,
        "changed": 1,
        "names": [third.name, first.name, second.name],
    }
    assert inventory_changed([first], [first]) is None


def test_a_span_is_keyed_by_short_level_names_unless_they_clash() -> None:
    assert level_span(
        {"topology.k8s.aws/network-node-layer-3": 1, "kubernetes.io/hostname": 2}
    ) == {
        "network-node-layer-3": 1,
        "hostname": 2,
    }
    clashing = {"a.io/rack": 1, "b.io/rack": 2}
    assert level_span(clashing) == clashing
