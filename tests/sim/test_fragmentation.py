"""Fragmentation (``topoq.sim.fragmentation``, the comparison table's *Fragmented*): free GPUs
that no waiting job's pod can use, as a time-weighted share of the cluster while a job waits.
Worked out by hand on a two-node cluster, checked against pods a GPU model keeps off a node,
None when nothing waits, and carried by ``topoq simulate --trace`` into its table, its JSON and
its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_cli import topoq
from tests.sim.test_compare import POLICY
from tests.sim.test_traces import ITP, PHILLY
from topoq.domain.job import JobId
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import (
    NodeSelectorTerm,
    PodSetSpec,
    SelectorOperator,
    SelectorRequirement,
)
from topoq.sim import run_scenario
from topoq.sim.compare import SUMMARY_COLUMNS, policy_figures, summary_cells
from topoq.sim.fragmentation import fragmentation
from topoq.sim.log import Decision, LogEntry

TWO_NODES = {"generate": "1x1x2 p5.48xlarge"}
"""Two nodes of 8 GPUs: 16 GPUs."""
ONE_TEAM = {
    "scheduling": {"idleResourceSharing": False},
    "teams": [{"name": "nlp", "quotas": [{"flavor": "p5.48xlarge", "instances": 2}]}],
}


def scenario(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "fragmentation.yaml"
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Scenario",
        "metadata": {"name": "fragmentation"},
        "cluster": TWO_NODES,
        "policy": ONE_TEAM,
        "events": events,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def job(at: float, job_id: str, gpus: int, runtime_s: float) -> dict[str, Any]:
    return {
        "at": at,
        "submit": {"id": job_id, "team": "nlp", "runtime_s": runtime_s, "pods": 1, "gpus": gpus},
    }


def test_free_gpus_too_few_for_any_waiting_pod_are_fragmented(tmp_path: Path) -> None:
    result = run_scenario(
        scenario(
            tmp_path,
            [
                job(0, "a", 5, 1000),  # node 1: 3 GPUs free
                job(0, "b", 8, 500),  # node 2: full until 500
                job(0, "c", 8, 100),  # waits for a whole node until b ends
                job(250, "d", 2, 100),  # queues behind c (its team's head), on node 1 at 500
                job(300, "e", 3, 100),  # queues too; node 1 has 1 free after d: waits for d
            ],
        )
    )
    starts = {e.job: e.t for e in result.log if e.decision is Decision.START}
    assert starts == {"a": 0, "b": 0, "c": 500, "d": 500, "e": 600}
    # Jobs wait from 0 to 600. The smallest waiting pod asks 8 GPUs until d arrives (250),
    # then 2 (d) until d starts (500), then 3 (e). Node 1 has 3 free until 500 (fragmented
    # only while the smallest ask is 8: d fits in them, whatever keeps it queued), then 1 (d
    # holds 2), too few for e; node 2 has none free while a job waits.
    fragmented_gpu_s = 3 * 250 + 0 * 250 + 1 * 100
    expected = fragmented_gpu_s / (16 * 600)
    figures = policy_figures("hand", result)
    assert figures.fragmentation == pytest.approx(expected) == pytest.approx(0.0885416)
    cells = dict(zip(SUMMARY_COLUMNS, summary_cells(figures, str), strict=True))
    assert cells["Fragmented"] == "8.9%"


def test_a_pod_larger_than_any_node_leaves_every_free_gpu_fragmented(tmp_path: Path) -> None:
    result = run_scenario(
        scenario(
            tmp_path,
            [
                job(0, "a", 4, 1000),  # node 1: 4 free
                job(0, "b", 8, 500),  # node 2: full until 500
                job(0, "c", 12, 100),  # one pod of 12 GPUs: no node has that many
                job(0, "d", 8, 100),  # waits for node 2, 500 to 600
            ],
        )
    )
    assert not [e for e in result.log if e.decision is Decision.START and e.job == "c"]
    assert result.end_s == 1000
    # c waits to the end (1000), and no free GPU is of use to it; until 500 d's pod of 8
    # waits too, and node 1's 4 free are too few for it. So node 1's 4 are fragmented
    # throughout, node 2's 8 from when d ends (600).
    fragmented_gpu_s = 4 * 500 + 4 * 100 + (4 + 8) * 400
    assert policy_figures("hand", result).fragmentation == pytest.approx(
        fragmented_gpu_s / (16 * 1000)
    )


def test_nothing_waits_no_fragmentation(tmp_path: Path) -> None:
    result = run_scenario(scenario(tmp_path, [job(0, "a", 5, 100), job(50, "b", 8, 100)]))
    assert not [e for e in result.log if e.decision is Decision.WAIT]
    figures = policy_figures("idle", result)
    assert figures.fragmentation is None
    cells = dict(zip(SUMMARY_COLUMNS, summary_cells(figures, str), strict=True))
    assert cells["Fragmented"] == "-"


def gpu_node(name: str, model: str) -> NodeSpec:
    labels = {"nvidia.com/gpu.product": model, "kubernetes.io/hostname": name}
    return NodeSpec(NodeName(name), labels, Resources({NVIDIA_GPU: 8}))


def on_model(model: str, gpus: int) -> PodSetSpec:
    requirement = SelectorRequirement("nvidia.com/gpu.product", SelectorOperator.IN, (model,))
    return PodSetSpec(
        "main",
        1,
        Resources({NVIDIA_GPU: gpus}),
        affinity_terms=(NodeSelectorTerm((requirement,)),),
    )


def test_free_gpus_of_a_model_no_waiting_pod_may_use_are_fragmented() -> None:
    nodes = [gpu_node("g2-1", "G2"), gpu_node("t4-1", "T4")]
    pod_sets = {JobId("x"): (on_model("G2", 8),), JobId("y"): (on_model("T4", 1),)}
    x, y = JobId("x"), JobId("y")
    log = [
        LogEntry(0, Decision.SUBMIT, y, gpus=1),
        LogEntry(0, Decision.ADMIT, y, gpus_on_nodes={"t4-1": 1}),
        LogEntry(0, Decision.START, y),
        LogEntry(0, Decision.SUBMIT, x, gpus=8),
        LogEntry(0, Decision.ADMIT, x, gpus_on_nodes={"g2-1": 8}),
        LogEntry(0, Decision.START, x),
        LogEntry(10, Decision.FINISH, x),
        # From 10 to 30 a second 1-GPU job waits that only T4 nodes take: the 8 free G2
        # GPUs are no use to it; 7 free on the T4 node are.
        LogEntry(10, Decision.SUBMIT, JobId("z"), gpus=1),
        LogEntry(30, Decision.ADMIT, JobId("z"), gpus_on_nodes={"t4-1": 1}),
        LogEntry(30, Decision.START, JobId("z")),
        # From 30 to 40 a G2 job of 8 waits (held, then released): the T4 node's 6 free
        # GPUs are fragmented, and the G2 node's 8 are not.
        LogEntry(30, Decision.SUBMIT, JobId("w"), gpus=8),
        LogEntry(40, Decision.HOLD, JobId("w")),
        LogEntry(60, Decision.RELEASE, JobId("w")),
        LogEntry(70, Decision.ADMIT, JobId("w"), gpus_on_nodes={"g2-1": 8}),
        LogEntry(70, Decision.START, JobId("w")),
    ]
    with_z = {**pod_sets, JobId("z"): (on_model("T4", 1),), JobId("w"): (on_model("G2", 8),)}
    # waits: 10-30 (z), 30-40 (w), none while w is held (40-60), 60-70 (w again)
    expected = (8 * 20 + 6 * 10 + 6 * 10) / (16 * (20 + 10 + 10))
    assert fragmentation(log, nodes, with_z, end_s=100) == pytest.approx(expected)
    # A job that may use either model would fit the free G2 GPUs: none fragmented then.
    anywhere = {**with_z, JobId("z"): (PodSetSpec("main", 1, Resources({NVIDIA_GPU: 1})),)}
    assert fragmentation(log[:10], nodes, anywhere, end_s=30) == pytest.approx(0.0)
    # No nodes (a recorded history does not say where pods ran): no figure.
    assert fragmentation(log, [], with_z, end_s=100) is None


def test_topoq_simulate_compares_fragmentation_under_each_policy(tmp_path: Path) -> None:
    whole, half = tmp_path / "whole.yaml", tmp_path / "half.yaml"
    whole.write_text(POLICY.format(name="whole", nodes=16))
    half.write_text(POLICY.format(name="half", nodes=8))
    ran = topoq("simulate", "--trace", ITP, "--policy", whole, "--policy", half, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    by_name = {one["policy"]: one for one in json.loads(ran.stdout)}
    assert by_name["half.yaml"]["wait"]["mean"] > 0  # jobs waited under half the cluster
    share = by_name["half.yaml"]["fragmentation"]
    assert isinstance(share, float) and 0 <= share <= 1
    assert all("fragmentation" in one for one in by_name.values())


TWO_NODE_CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata: {name: two-nodes}
generate: 1x1x2 p5.48xlarge
"""


def test_topoq_simulate_reports_fragmentation_where_jobs_of_odd_sizes_wait(
    tmp_path: Path,
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(TWO_NODE_CLUSTER)
    # Philly's jobs of 1, 2 and 4 GPUs on 16 GPUs: the queue is long, and the few GPUs
    # left on a node are often too few for every job waiting.
    args = ("simulate", "--trace", PHILLY, "--cluster", cluster, "--no-cost-model")
    args += ("--placement", "topoq", "--placement", "first-fit")
    ran = topoq(*args, "-o", "json", "--report", tmp_path / "report")
    assert ran.returncode == 0, ran.stderr
    figures = json.loads(ran.stdout)
    shares = [one["fragmentation"] for one in figures]
    assert all(isinstance(share, float) and 0 < share < 1 for share in shares), shares
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "<th>Fragmented</th>" in page
    assert all(f"<td>{share:.1%}</td>" in page for share in shares)
    table = topoq(*args)
    assert table.returncode == 0, table.stderr
    assert "Fragmen" in table.stdout  # the column's header (rich may cut it short)
    assert all(f"{share:.1%}" in table.stdout for share in shares)
