"""``topoq cluster apply`` and a start on another ``--cluster`` file, against a real server: the
inventory follows the file, a running gang is never dropped silently (refused, or requeued with
--drain and run elsewhere), and the policy lint refuses a policy with an error, at
``policy apply`` and at start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import yaml

from tests.cli.test_server_cli import topoq as topoq_as
from topoq.client import TopoqClient
from topoq.discovery.clusterfile import cluster_document
from topoq.discovery.sources import load_cluster
from topoq.domain.node import HOSTNAME_LABEL, NodeName, NodeSpec
from topoq.executors.local.processes import free_port
from topoq.testing.server import RunningServer, running_server

ROOT = Path(__file__).resolve().parents[2]
API_TESTS = ROOT / "tests" / "api"
CLUSTER = load_cluster(API_TESTS / "cluster.yaml")
JOB_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: long, namespace: hyperpod-ns-nlp}
spec:
  podSets:
  - name: workers
    count: 2
    requests: {nvidia.com/gpu: 8}
"""


def topoq(server: RunningServer, *args: str | Path) -> subprocess.CompletedProcess[str]:
    token_file = str(server.data_dir / "admin-token")
    return topoq_as({"TOPOQ_SERVER": server.url, "TOPOQ_TOKEN_FILE": token_file}, *args)


def cluster_file(path: Path, nodes: list[NodeSpec]) -> Path:
    path.write_text(yaml.safe_dump(cluster_document(nodes, CLUSTER.topology, path.stem)))
    return path


def extra(name: str) -> NodeSpec:
    last = CLUSTER.nodes[-1]
    return replace(last, name=NodeName(name), labels=dict(last.labels) | {HOSTNAME_LABEL: name})


def client(server: RunningServer) -> TopoqClient:
    token = (server.data_dir / "admin-token").read_text().strip()
    return TopoqClient(server.url, token)


def wait_for(what: Callable[[], bool], message: str) -> None:
    deadline = time.monotonic() + 30
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.3)


def running_nodes(server: RunningServer, job: str) -> list[str]:
    with client(server) as api:
        detail = api.job(job)
    if detail.phase.value != "running" or detail.allocation is None:
        return []
    return sorted(detail.allocation.nodes)


def start(data_dir: Path, *options: str | Path) -> subprocess.CompletedProcess[str]:
    """A start expected to be refused (it ends by itself)."""
    command = [sys.executable, "-m", "topoq", "server", "--port", str(free_port())]
    command += ["--data-dir", str(data_dir), *map(str, options)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_apply_drain_and_restart_follow_the_cluster_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with_9 = cluster_file(tmp_path / "with-9.yaml", [*CLUSTER.nodes, extra("p5-0009")])
    environment = os.environ | {"TOPOQ_SLEEP_S": "600"}
    with running_server(
        data_dir,
        cluster=API_TESTS / "cluster.yaml",
        policy=API_TESTS / "policy.yaml",
        environment=environment,
        through_cli=True,
    ) as server:
        dry = topoq(server, "cluster", "apply", with_9, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "added" in dry.stdout and "p5-0009" in dry.stdout and "dry run" in dry.stdout
        assert "p5-0009" not in topoq(server, "nodes").stdout
        applied = topoq(server, "cluster", "apply", with_9)
        assert applied.returncode == 0 and "applied: 9 nodes" in applied.stdout, applied.stderr
        assert "p5-0009" in topoq(server, "nodes").stdout

        (tmp_path / "job.yaml").write_text(JOB_FILE)
        assert topoq(server, "submit", tmp_path / "job.yaml").returncode == 0
        wait_for(lambda: bool(running_nodes(server, "long")), "the job never ran")
        first, _ = running_nodes(server, "long")
        without_first = [n for n in [*CLUSTER.nodes, extra("p5-0009")] if n.name != first]
        smaller = cluster_file(tmp_path / "smaller.yaml", without_first)
        refused = topoq(server, "cluster", "apply", smaller)
        assert refused.returncode == 2, refused.stdout
        assert f"removes node {first} (long run there)" in refused.stderr
        assert "--drain" in refused.stderr and "Traceback" not in refused.stderr
        assert first in topoq(server, "nodes").stdout

        drained = topoq(server, "cluster", "apply", smaller, "--drain", "-o", "json")
        assert drained.returncode == 0, drained.stderr
        assert yaml.safe_load(drained.stdout)["requeued"] == ["long"]
        wait_for(
            lambda: (
                bool(running_nodes(server, "long")) and first not in running_nodes(server, "long")
            ),
            "the requeued job never ran elsewhere",
        )
        now_on = running_nodes(server, "long")

    # the store says "long" runs on now_on: a start that drops one of them is refused
    without_gang_node = [n for n in without_first if n.name != now_on[0]]
    dropping = cluster_file(tmp_path / "dropping.yaml", without_gang_node)
    refused_start = start(data_dir, "--cluster", dropping)
    assert refused_start.returncode == 2, refused_start.stderr
    [line] = [x for x in refused_start.stderr.splitlines() if x.startswith("error:")]
    assert f"removes node {now_on[0]}" in line and "topoq cluster apply" in line
    assert "Traceback" not in refused_start.stderr

    grown = cluster_file(tmp_path / "grown.yaml", [*without_first, extra("p5-0010")])
    with running_server(data_dir, cluster=grown, through_cli=True) as server:
        nodes = topoq(server, "nodes").stdout
        assert "p5-0010" in nodes and first not in nodes
        assert any("inventory_applied" in line for line in server.log_lines())


BAD_POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: too-much}
teams:
- name: nlp
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 12}
"""
WARNED_POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: warned}
teams:
- name: nlp
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 4}
- name: research
"""


def test_the_policy_lint_refuses_an_error_at_apply_and_at_start(tmp_path: Path) -> None:
    bad, warned = tmp_path / "bad.yaml", tmp_path / "warned.yaml"
    bad.write_text(BAD_POLICY)
    warned.write_text(WARNED_POLICY)
    broken = tmp_path / "broken-cluster.yaml"
    broken.write_text(
        "apiVersion: topoq.io/v1\nkind: Cluster\nnodes:\n"
        "- {name: a, allocatable: {nvidia.com/gpu: many}}\n"
    )
    with running_server(
        tmp_path / "data", cluster=API_TESTS / "cluster.yaml", through_cli=True
    ) as server:
        refused = topoq(server, "policy", "apply", bad)
        assert refused.returncode == 2 and "GUARANTEES_EXCEED_CAPACITY" in refused.stderr
        assert "Traceback" not in refused.stderr
        applied = topoq(server, "policy", "apply", warned)
        assert applied.returncode == 0, applied.stderr
        wait_for(
            lambda: any(
                "policy_lint" in line and "NO_QUOTA" in line and "research" in line
                for line in server.log_lines()
            ),
            "the lint's warning was not logged",
        )
        malformed = topoq(server, "cluster", "apply", broken)
        assert malformed.returncode == 2 and "broken-cluster.yaml" in malformed.stderr
        assert "Traceback" not in malformed.stderr
        assert len(topoq(server, "nodes").stdout.splitlines()) > 8  # the 8 nodes stay

    refused_start = start(
        tmp_path / "fresh", "--cluster", API_TESTS / "cluster.yaml", "--policy", bad
    )
    assert refused_start.returncode == 2
    [line] = [x for x in refused_start.stderr.splitlines() if x.startswith("error:")]
    assert "GUARANTEES_EXCEED_CAPACITY" in line and "Traceback" not in refused_start.stderr
