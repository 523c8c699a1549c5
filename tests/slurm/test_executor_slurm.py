"""What the Slurm executor does beyond the contract, against the real bed: a gang Slurm will not
start on its nodes is reported, not left pending; the inventory follows Slurm's node states."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executors.contract import SLEEP
from tests.executors.launches import gang, place, poll_until, python
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.slurm.executor import SlurmExecutor
from topoq.testbeds.slurm import SlurmBed, reset, run_slurm


@pytest.fixture
def executor(slurm_bed: SlurmBed, tmp_path: Path) -> Iterator[SlurmExecutor]:
    yield SlurmExecutor(tmp_path / "work", slurm_bed.slurm_conf)
    reset(slurm_bed)


def test_a_gang_slurm_will_not_start_on_its_nodes_is_reported_and_cancelled(
    slurm_bed: SlurmBed, executor: SlurmExecutor
) -> None:
    placed = place(gang("stuck"))
    node = sorted(placed.allocation("stuck").nodes)[0]
    run_slurm(slurm_bed, ["scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=x"])
    executor.start(placed.launch("stuck", command=python(SLEEP)))
    [event] = poll_until(executor, bool, timeout_s=20)
    assert event.kind is ExecutorEventKind.START_FAILED and event.job == "stuck"
    assert "did not start" in event.message and node in event.message
    queued = run_slurm(slurm_bed, ["squeue", "-h", "-t", "PD,R", "-o", "%j"]).stdout
    assert "topoq-stuck" not in queued


def test_the_inventory_follows_slurms_node_states(
    slurm_bed: SlurmBed, executor: SlurmExecutor
) -> None:
    first = executor.inventory_changes()
    assert first is not None and len(first) == 16
    assert executor.inventory_changes() is None  # nothing changed since
    run_slurm(slurm_bed, ["scontrol", "update", "NodeName=n12", "State=DRAIN", "Reason=x"])
    run_slurm(slurm_bed, ["scontrol", "update", "NodeName=n13", "State=DOWN", "Reason=x"])
    changed = {str(n.name): n for n in executor.inventory_changes() or []}
    assert changed["n12"].unschedulable and changed["n12"].ready
    assert not changed["n13"].ready
    assert changed["n00"].schedulable
    assert changed["n00"].labels["topology.topoq.io/slurm-switch-1"] == "root"
    assert changed["n00"].labels["topology.topoq.io/slurm-switch-2"] == "spine01"
    assert changed["n00"].labels["topology.topoq.io/slurm-switch-3"] == "leaf01"
