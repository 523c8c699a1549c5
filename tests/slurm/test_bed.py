"""The project's own Slurm test bed: real daemons, the shape asked for, stopped by PID."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cli.test_demo import processes_using
from tests.slurm.conftest import BED_SHAPE, root_or_skip
from topoq.testbeds.daemons import BedError, is_alive, recorded
from topoq.testbeds.slurm import (
    SlurmBed,
    SlurmShape,
    bed_in,
    bring_up,
    node_states,
    run_slurm,
    tear_down,
)


def test_every_node_of_the_shape_is_idle_with_eight_gpus(slurm_bed: SlurmBed) -> None:
    states = node_states(slurm_bed)
    assert sorted(states) == [f"n{i:02d}" for i in range(16)]
    shown = run_slurm(slurm_bed, ["scontrol", "show", "node", "n15"]).stdout
    assert "Gres=gpu:8" in shown
    assert "CPUTot=32" in shown


def test_the_topology_is_leaves_under_spines_under_a_root(slurm_bed: SlurmBed) -> None:
    shown = run_slurm(slurm_bed, ["scontrol", "show", "topology"]).stdout
    assert "SwitchName=leaf01 Level=0" in shown and "Nodes=n[00-03]" in shown
    assert "SwitchName=spine02 Level=1" in shown and "Switches=leaf[03-04]" in shown
    assert "SwitchName=root Level=2" in shown


def test_a_pinned_job_runs_on_exactly_its_nodes(slurm_bed: SlurmBed, tmp_path: Path) -> None:
    out = tmp_path / "out"
    submitted = run_slurm(
        slurm_bed,
        [
            "sbatch", "--parsable", "--wait", "--nodelist=n[06-07]", "--nodes=2",
            "--gres=gpu:2", f"--output={out}", "--wrap",
            "srun bash -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'",
        ],
        timeout_s=60,
    )  # fmt: skip
    assert submitted.returncode == 0
    assert sorted(out.read_text().split("\n")[:2]) == ["n06 0,1", "n07 0,1"]


def test_the_record_names_the_bed_and_a_second_bring_up_there_is_refused(
    slurm_bed: SlurmBed,
) -> None:
    assert bed_in(slurm_bed.directory) == slurm_bed
    with pytest.raises(BedError, match="records a bed already"):
        bring_up(slurm_bed.directory, BED_SHAPE)


def test_tear_down_stops_exactly_the_daemons_it_started_and_the_jobs_they_ran(
    tmp_path: Path,
) -> None:
    root_or_skip()
    deep = tmp_path / ("a-deep-directory-" * 4) / "bed"  # slurmstepd's sockets stay short
    names = ("node-with-a-long-name-1", "node-with-a-long-name-2")
    bed = bring_up(deep, SlurmShape(leaves=1, nodes_per_leaf=2, gpus_per_node=0, names=names))
    try:
        daemons = recorded(bed.directory)
        assert sorted(daemons) == ["munged", "slurmctld", *(f"slurmd-{name}" for name in names)]
        assert all(is_alive(daemon) for daemon in daemons.values())
        marker = tmp_path / "ran"
        wrap = f"--wrap=srun bash -c 'touch {marker}-$SLURM_PROCID'; sleep 300"
        run_slurm(bed, ["sbatch", "--nodes=2", "--ntasks-per-node=1", wrap])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "ran-1").exists():
            time.sleep(0.2)
        assert (tmp_path / "ran-0").exists() and (tmp_path / "ran-1").exists()
        stopped = tear_down(bed.directory)
        assert stopped[:2] == [f"slurmd-{name}" for name in names]
        assert stopped[2:] == ["slurmctld", "munged"]
        assert not any(is_alive(daemon) for daemon in daemons.values())
        assert processes_using(bed.directory) == [] and processes_using(bed.spool) == []
        assert not bed.spool.exists() and bed_in(bed.directory) is None
    finally:
        tear_down(bed.directory)  # a failed check above must not leave daemons running
    assert tear_down(bed.directory) == []


@pytest.mark.parametrize(
    ("shape", "wrong"),
    [
        ({"leaves": 0}, "leaves must be 1 to 1024"),
        ({"nodes_per_leaf": 5000}, "nodes-per-leaf must be 1 to 1024"),
        ({"gpus_per_node": -1}, "gpus must be 0 to 64"),
        ({"leaves": 100, "nodes_per_leaf": 100}, "more than this machine can run"),
    ],
)
def test_a_shape_out_of_range_is_refused_with_what_to_fix(
    shape: dict[str, int], wrong: str
) -> None:
    with pytest.raises(BedError, match=wrong):
        SlurmShape(**shape)
