"""``topoq server --executor slurm --cluster FILE --write-topology`` on the real Slurm bed: the
nodes take their topology and instance type from topoq's cluster file (their resources and
state from Slurm), topology.conf is rewritten to match, checked, and read by slurmctld
(``scontrol show topology``) — and a file that would drop a Slurm node from the tree is
refused, the old one kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.executors.launches import wait_until
from tests.slurm.test_server_slurm import api, phase_is, placed_nodes, submit
from topoq.executors.slurm.topology_conf import PREVIOUS_SUFFIX, ROOT_SWITCH, leaf_switches
from topoq.testbeds.slurm import SlurmBed, reset, run_slurm
from topoq.testing.server import running_server

SPINE = "topology.k8s.aws/network-node-layer-1"
BLOCK = "topology.k8s.aws/network-node-layer-2"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def cluster_file(path: Path, nodes: list[str]) -> Path:
    """Two spines of one block of 8 nodes each (the bed's own topology.conf has 4 leaves of 4)."""
    entries = [
        {
            "name": name,
            "labels": {
                SPINE: f"spine-{index // 8 + 1}",
                BLOCK: f"block-{index // 8 + 1}",
                INSTANCE_TYPE: "ml.p5.48xlarge",
            },
            "allocatable": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"},
        }
        for index, name in enumerate(nodes)
    ]
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": "from-aws"},
        "levels": [SPINE, BLOCK, "kubernetes.io/hostname"],
        "nodes": entries,
    }
    path.write_text(yaml.safe_dump(document))
    return path


POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: p5-on-slurm}
teams:
- name: nlp
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 16}
"""


@pytest.fixture
def original_topology(slurm_bed: SlurmBed) -> Iterator[Path]:
    """The bed's topology.conf, put back (and read by slurmctld) after the test."""
    conf = slurm_bed.slurm_conf.parent / "topology.conf"
    kept = conf.read_text()
    yield conf
    conf.write_text(kept)
    conf.with_name(conf.name + PREVIOUS_SUFFIX).unlink(missing_ok=True)
    run_slurm(slurm_bed, ["scontrol", "reconfigure"])
    reset(slurm_bed)


def test_topology_conf_is_rewritten_from_topoqs_view_and_slurm_reads_it(
    slurm_bed: SlurmBed, original_topology: Path, tmp_path: Path
) -> None:
    before = leaf_switches(original_topology.read_text())
    cluster = cluster_file(tmp_path / "cluster.yaml", sorted(slurm_bed.nodes))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)  # quotas in the file's instance type, which Slurm does not know
    options = ["--executor", "slurm", "--slurm-conf", str(slurm_bed.slurm_conf), "--write-topology"]
    with running_server(tmp_path / "data", *options, cluster=cluster, policy=policy) as server:
        http = api(server)
        wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
        wait_until(
            lambda: any("slurm_topology_written" in line for line in server.log_lines()),
            20,
            "topology.conf to be written",
        )
        written = leaf_switches(original_topology.read_text())
        assert written == {
            "block-1": frozenset(sorted(slurm_bed.nodes)[:8]),
            "block-2": frozenset(sorted(slurm_bed.nodes)[8:]),
        }
        assert f"SwitchName={ROOT_SWITCH} Switches=spine-[1-2]" in original_topology.read_text()
        shown = run_slurm(slurm_bed, ["scontrol", "show", "topology"]).stdout
        assert leaf_switches(shown) == written  # slurmctld reads the new file
        previous = original_topology.with_name(original_topology.name + PREVIOUS_SUFFIX)
        assert leaf_switches(previous.read_text()) == before
        nodes = {n["name"]: n for n in http.get("/nodes").json()}
        assert {n["labels"][BLOCK] for n in nodes.values()} == {"block-1", "block-2"}
        assert {n["labels"][INSTANCE_TYPE] for n in nodes.values()} == {"ml.p5.48xlarge"}
        # topoq places by the file's blocks, and Slurm runs the gang where topoq placed it
        submit(http, "in-a-block", "nlp", 8, "sleep 30", required=BLOCK)
        wait_until(lambda: phase_is(http, "in-a-block", "running"), 30, "the gang to run")
        placed = set(placed_nodes(http, "in-a-block"))
        assert placed in set(written.values())
        # a later start with the same view writes nothing
        lines = len(server.log_lines())
    with running_server(tmp_path / "data", *options, cluster=cluster) as again:
        wait_until(lambda: len(api(again).get("/nodes").json()) == 16, 20, "Slurm's nodes")
        assert not any("slurm_topology" in line for line in again.log_lines()[lines:])


def test_a_view_that_would_drop_a_slurm_node_is_refused_and_the_file_kept(
    slurm_bed: SlurmBed, original_topology: Path, tmp_path: Path
) -> None:
    before = original_topology.read_text()
    cluster = cluster_file(tmp_path / "cluster.yaml", sorted(slurm_bed.nodes)[:-1])
    options = ["--executor", "slurm", "--slurm-conf", str(slurm_bed.slurm_conf), "--write-topology"]
    with running_server(tmp_path / "data", *options, cluster=cluster) as server:
        wait_until(
            lambda: any("slurm_topology_refused" in line for line in server.log_lines()),
            20,
            "the refusal",
        )
        [line] = [line for line in server.log_lines() if "slurm_topology_refused" in line]
        assert sorted(slurm_bed.nodes)[-1] in line and "--cluster" in line
        assert original_topology.read_text() == before
        shown = run_slurm(slurm_bed, ["scontrol", "show", "topology"]).stdout
        assert leaf_switches(shown) == leaf_switches(before)


def test_write_topology_without_a_cluster_file_is_refused_at_start(
    slurm_bed: SlurmBed, tmp_path: Path
) -> None:
    options = ["--executor", "slurm", "--slurm-conf", str(slurm_bed.slurm_conf), "--write-topology"]
    with (
        pytest.raises(AssertionError, match="--write-topology"),
        running_server(tmp_path / "data", *options),
    ):
        pass
