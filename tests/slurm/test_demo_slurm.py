"""`topoq demo --executor slurm`: the demo's story on a real Slurm cluster it brings up (64
slurmd named and grouped as the demo cluster's nodes), every scene shown — each gang a Slurm
job, topology.conf written from the demo's blocks — and every daemon and job stopped after."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_demo import processes_using
from tests.slurm.conftest import root_or_skip
from topoq.executors.slurm.topology_conf import leaf_switches
from topoq.testbeds.daemons import recorded


def test_the_quick_demo_plays_every_scene_on_slurm_and_stops_its_cluster(tmp_path: Path) -> None:
    root_or_skip()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")}
    data = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "topoq", "demo", "--quick", "--executor", "slurm",
         "--data-dir", str(data)],
        capture_output=True, text=True, timeout=900, check=False, env=environment,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "All 5 scenes showed what they should" in run.stdout
    assert "its pod says so" in run.stdout  # where jobs ran, read from the pods' own output
    assert "squeue" in run.stdout and "scontrol show topology" in run.stdout
    written = leaf_switches((data / "slurm" / "topology.conf").read_text())
    assert len(written) == 8 and all(len(nodes) == 8 for nodes in written.values())
    assert {name[:5] for name in written} == {"l2-01", "l2-02"}  # the demo's block names
    assert not recorded(data / "slurm")  # every daemon of the cluster was stopped
    assert processes_using(data) == []  # no daemon, job step or pod left behind
