"""The `topoq` command as a user runs it: a real process, its output and its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "examples" / "kubernetes"
WORKLOADS = ROOT / "examples" / "workloads"
DEMO = ROOT / "src" / "topoq" / "data" / "demo"


def topoq(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topoq", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_place_prints_the_documented_json() -> None:
    run = topoq(
        "place",
        "--nodes",
        K8S / "nodes.json",
        "--topology",
        K8S / "topology.yaml",
        "--pods",
        K8S / "pods.json",
        "--workload",
        WORKLOADS / "required-block.yaml",
        "--output",
        "json",
    )
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert set(document) == {"workload", "admitted", "podsets"}
    assert document["admitted"] is True
    pod_set = document["podsets"][0]
    assert pod_set["result"] == "assigned" and pod_set["reason"] is None
    assert sum(a["count"] for a in pod_set["assignment"]) == pod_set["count"]
    blocks = {a["domain"]["topology.k8s.aws/network-node-layer-3"] for a in pod_set["assignment"]}
    assert len(blocks) == 1
    assert all(a["node"] for a in pod_set["assignment"])


def test_place_on_the_default_cluster_reports_an_unschedulable_gang_with_exit_0() -> None:
    workload = DEMO / "4-too-big.yaml"
    run = topoq("place", "--workload", workload, "--output", "json")
    assert run.returncode == 0, run.stderr
    pod_set = json.loads(run.stdout)["podsets"][0]
    # alone on the example cluster, 30 whole nodes fit in one spine
    assert pod_set["result"] == "assigned"


def test_unschedulable_workload_has_reason_numbers_and_relaxations(tmp_path: Path) -> None:
    workload = tmp_path / "big.yaml"
    workload.write_text((DEMO / "4-too-big.yaml").read_text().replace("count: 30", "count: 40"))
    run = topoq("place", "--workload", workload, "--output", "json")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    pod_set = document["podsets"][0]
    assert document["admitted"] is False
    assert pod_set["result"] == "unschedulable"
    assert pod_set["reason"] == "TOPOLOGY_UNSATISFIABLE"
    assert pod_set["numbers"]["requested_pods"] == 40
    assert pod_set["numbers"]["max_pods_in_one_domain"] < 40
    assert any("preferred" in text for text in pod_set["relaxations"])
    assert pod_set["assignment"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["place", "--workload", "missing.yaml"], "missing.yaml: file not found"),
        (["place", "--workload", "README.md"], "README.md"),
        (
            [
                "place",
                "--workload",
                DEMO / "1-llama-pretrain.yaml",
                "--nodes",
                "examples/slurm/topology-broken.conf",
            ],
            "topology-broken.conf:",
        ),
        (["topology", "show", "--nodes", "pyproject.toml"], "pyproject.toml"),
        (
            ["topology", "validate", "--nodes", "examples/slurm/topology-broken.conf"],
            "topology-broken.conf:",
        ),
    ],
)
def test_bad_input_exits_2_with_a_one_line_message(args: list[str | Path], message: str) -> None:
    run = topoq(*args)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("error: ")
    assert message in run.stderr


def test_unknown_level_in_the_workload_is_bad_input(tmp_path: Path) -> None:
    workload = tmp_path / "job.yaml"
    text = (WORKLOADS / "required-block.yaml").read_text()
    workload.write_text(text.replace("topology.k8s.aws/network-node-layer-3", "rack"))
    run = topoq(
        "place",
        "--workload",
        workload,
        "--nodes",
        K8S / "nodes.json",
        "--topology",
        K8S / "topology.yaml",
    )
    assert run.returncode == 2
    assert "'rack' is not a level" in run.stderr
    assert "use one of:" in run.stderr


def test_topology_show_draws_free_and_total_gpus() -> None:
    run = topoq(
        "topology",
        "show",
        "--nodes",
        K8S / "nodes.json",
        "--topology",
        K8S / "topology.yaml",
        "--pods",
        K8S / "pods.json",
    )
    assert run.returncode == 0, run.stderr
    assert "GPU free" in run.stdout
    assert "left out of the topology" in run.stdout


def test_exported_slurm_topology_validates_and_keeps_every_node(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    export = topoq("topology", "export", "--to", "slurm-tree", "--out", conf)
    assert export.returncode == 0, export.stderr
    check = topoq("topology", "validate", "--nodes", conf, "--output", "json")
    assert check.returncode == 0, check.stderr
    summary = json.loads(check.stdout)
    assert summary["nodes"] == 64
    assert [level["domains"] for level in summary["levels"]] == [2, 8, 64]


def test_kueue_export_reads_back_as_the_same_levels(tmp_path: Path) -> None:
    exported = tmp_path / "topology.yaml"
    run = topoq("topology", "export", "--to", "kueue", "--out", exported)
    assert run.returncode == 0, run.stderr
    show = topoq("topology", "show", "--topology", exported, "--output", "json")
    labels = [level["label"] for level in json.loads(show.stdout)["levels"]]
    assert labels == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "kubernetes.io/hostname",
    ]


def test_offline_demo_runs_and_shows_a_refusal_with_its_reason() -> None:
    run = topoq("demo", "--offline")
    assert run.returncode == 0, run.stderr
    assert "llama-pretrain: admitted" in run.stdout
    assert "moe-pretrain: not admitted" in run.stdout
    assert "TOPOLOGY_UNSATISFIABLE" in run.stdout


def test_policy_commands_run_as_a_process(tmp_path: Path) -> None:
    lint = topoq("policy", "lint", "--policy", "examples/policies/policy.yaml")
    assert lint.returncode == 0, lint.stderr
    converted = tmp_path / "policy.yaml"
    hyperpod = ROOT / "examples" / "policies" / "hyperpod"
    convert = topoq(
        "policy",
        "convert",
        "--from-hyperpod",
        "--hyperpod-scheduler-config",
        hyperpod / "scheduler-config.json",
        *[arg for q in sorted(hyperpod.glob("quota-*.json")) for arg in ("--hyperpod-quota", q)],
        "--out",
        converted,
    )
    assert convert.returncode == 0, convert.stderr
    show = topoq("policy", "show", "--policy", converted, "--output", "json")
    assert show.returncode == 0, show.stderr
    assert {team["name"] for team in json.loads(show.stdout)["teams"]} == {
        "nlp",
        "vision",
        "serving",
    }
    over = tmp_path / "over.yaml"
    over.write_text(
        (ROOT / "examples" / "policies" / "policy.yaml")
        .read_text()
        .replace("instances: 24 ", "instances: 240")
    )
    failing = topoq("policy", "lint", "--policy", over)
    assert failing.returncode == 1
    assert "GUARANTEES_EXCEED_CAPACITY" in failing.stdout
    assert "2112 nvidia.com/gpu guaranteed, the cluster has 512" in failing.stdout
    missing = topoq("policy", "lint", "--policy", tmp_path / "nope.yaml")
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")
