"""How the CLI shows shares of a GPU: counted into the GPUs, as a decimal; where ``topoq place``
packs them, device by device; and why a share cannot go where no node is open to shares."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topoq.cli.server_commands import readable_amounts


@pytest.mark.parametrize(
    ("amounts", "shown"),
    [
        ({"cpu": "12", "topoq.io/gpu-milli": "1500"}, "nvidia.com/gpu 1.5, cpu 12"),
        (
            {"memory": "1536Gi", "nvidia.com/gpu": "2", "topoq.io/gpu-milli": "500"},
            "nvidia.com/gpu 2.5, memory 1.5Ti",
        ),
        ({"nvidia.com/gpu": "8", "memory": "1536Gi"}, "nvidia.com/gpu 8, memory 1.5Ti"),
        ({"topoq.io/gpu-milli": "not a number"}, "topoq.io/gpu-milli not a number"),
    ],
)
def test_shares_are_counted_into_the_gpus(amounts: dict[str, str], shown: str) -> None:
    assert readable_amounts(amounts) == shown


SHARE_JOB = """\
apiVersion: topoq.io/v1
kind: Job
metadata:
  name: notebooks
spec:
  podSets:
    - name: main
      count: 3
      requests: {nvidia.com/gpu: "0.5", cpu: 4}
"""

OPEN_CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata:
  name: shared
levels: [topology.k8s.aws/network-node-layer-1, kubernetes.io/hostname]
nodes:
  - name: gpu-1
    instance_type: p5.48xlarge
    labels: {topology.k8s.aws/network-node-layer-1: block-1, topoq.io/gpu-sharing: "true"}
  - name: gpu-2
    instance_type: p5.48xlarge
    labels: {topology.k8s.aws/network-node-layer-1: block-1}
"""


def _place(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    job = tmp_path / "job.yaml"
    job.write_text(SHARE_JOB)
    return subprocess.run(
        [sys.executable, "-m", "topoq", "place", "--workload", str(job), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_place_shows_the_gpu_device_each_share_is_packed_on(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(OPEN_CLUSTER)
    run = _place(tmp_path, "--nodes", str(cluster), "-o", "json")
    assert run.returncode == 0, run.stderr
    (assignment,) = json.loads(run.stdout)["podsets"][0]["assignment"]
    assert assignment["node"] == "gpu-1"  # the node open to shares, not the other
    assert assignment["gpuDevices"] == [[0], [0], [1]]  # two halves share device 0
    table = _place(tmp_path, "--nodes", str(cluster))
    assert "GPU devices" in table.stdout and "0 0 1" in table.stdout


def test_place_of_a_share_where_no_node_is_open_says_how_to_open_one(tmp_path: Path) -> None:
    run = _place(tmp_path)  # topoq's example cluster: no node open to shares
    assert run.returncode == 0, run.stderr
    said = " ".join(run.stdout.split())
    assert "asks for a share of one GPU (0.5 nvidia.com/gpu)" in said
    assert "no node of the topology is open to GPU shares" in said
    assert 'label GPU nodes topoq.io/gpu-sharing: "true"' in said
    assert "gpu-milli" not in said  # the resource it is kept as is not the user's word
