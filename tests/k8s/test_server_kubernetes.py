"""A real ``topoq server --executor kubernetes`` on the test bed: its nodes come from the API
server, admitted gangs become Pods bound to the placed nodes, a cordon or a node gone NotReady
reaches topoq, and a server killed with pods running adopts them when it comes back."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.executors.launches import wait_until
from topoq.domain.job import JobId
from topoq.executors.kubernetes.manifests import job_selector
from topoq.testbeds.kubernetes import KubernetesBed
from topoq.testing.server import RunningServer, running_server

BED_NODES = "type=kwok,!topoq.io/bed-set"
TEAM = "vision"
POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: k8s-server-tests}
teams:
- name: vision
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 16}
"""


def server_options(bed: KubernetesBed) -> list[str]:
    return [
        "--executor",
        "kubernetes",
        "--kubeconfig",
        str(bed.kubeconfig),
        "--node-selector",
        BED_NODES,
    ]


def api(server: RunningServer) -> httpx.Client:
    token = (server.data_dir / "admin-token").read_text().strip()
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def submit(http: httpx.Client, job: str, pods: int, *, sleep_s: str = "3600") -> None:
    body = {
        "format": "topoq",
        "team": TEAM,
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": job},
            "spec": {
                "podSets": [
                    {
                        "name": "w",
                        "count": pods,
                        "requests": {"nvidia.com/gpu": 8},
                        "environment": {"TOPOQ_SLEEP_S": sleep_s},
                    }
                ]
            },
        },
    }
    answer = http.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text


def job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    answer = http.get(f"/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def phase_is(http: httpx.Client, job_id: str, *phases: str) -> bool:
    return job(http, job_id)["phase"] in phases


def bound_pods(core: Any, job_id: str) -> list[Any]:
    pods = core.list_namespaced_pod(TEAM, label_selector=job_selector(JobId(job_id))).items
    return [pod for pod in pods if pod.spec.node_name and pod.metadata.deletion_timestamp is None]


@pytest.fixture
def core(k8s_bed: KubernetesBed) -> Iterator[Any]:
    api_core = client.CoreV1Api(k8s_bed.api_client())
    yield api_core
    api_core.delete_collection_namespaced_pod(TEAM, grace_period_seconds=0)
    api_core.delete_collection_namespaced_service(TEAM)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def test_gangs_run_as_pods_on_the_placed_nodes_and_the_inventory_follows_the_cluster(
    k8s_bed: KubernetesBed, core: Any, policy_file: Path, tmp_path: Path
) -> None:
    with running_server(tmp_path / "data", *server_options(k8s_bed), policy=policy_file) as server:
        http = api(server)
        wait_until(lambda: len(http.get("/nodes").json()) == len(k8s_bed.nodes), 20, "nodes")
        nodes = {n["name"]: n for n in http.get("/nodes").json()}
        assert set(nodes) == set(k8s_bed.nodes)
        assert all(n["gpus"] == 8 and n["ready"] for n in nodes.values())
        submit(http, "pair", 2)
        wait_until(lambda: phase_is(http, "pair", "running"), 30, "the gang to run")
        placed = sorted(job(http, "pair")["allocation"]["nodes"])
        assert sorted(p.spec.node_name for p in bound_pods(core, "pair")) == placed
        # a cordon made with kubectl (spec.unschedulable) is topoq's cordon too, and one made
        # through topoq is not undone when the cluster's report of it comes
        by_topoq, cordoned = sorted(set(k8s_bed.nodes) - set(placed))[:2]
        assert http.post(f"/nodes/{by_topoq}/cordon").status_code == 200
        core.patch_node(cordoned, {"spec": {"unschedulable": True}})
        try:
            wait_until(
                lambda: {n["name"]: n for n in http.get("/nodes").json()}[cordoned]["cordoned"],
                10,
                "the cordon to reach topoq",
            )
            assert {n["name"]: n for n in http.get("/nodes").json()}[by_topoq]["cordoned"]
        finally:
            core.patch_node(cordoned, {"spec": {"unschedulable": False}})
            http.post(f"/nodes/{by_topoq}/uncordon")


def test_a_node_gone_not_ready_requeues_its_gang_elsewhere(
    k8s_bed: KubernetesBed, core: Any, policy_file: Path, tmp_path: Path
) -> None:
    with running_server(tmp_path / "data", *server_options(k8s_bed), policy=policy_file) as server:
        http = api(server)
        submit(http, "hit", 2)
        wait_until(lambda: phase_is(http, "hit", "running"), 30, "the gang to run")
        lost = sorted(job(http, "hit")["allocation"]["nodes"])[0]
        first = {p.metadata.name for p in bound_pods(core, "hit")}
        core.patch_node(
            lost, {"metadata": {"labels": {"node-not-ready.stage.kwok.x-k8s.io": "true"}}}
        )
        try:
            wait_until(
                lambda: not {n["name"]: n for n in http.get("/nodes").json()}[lost]["ready"],
                30,
                "the node to be failed in topoq",
            )

            def requeued_and_running() -> bool:
                found = job(http, "hit")
                causes = " ".join(change["cause"] for change in found["history"])
                return f"node {lost}" in causes and found["phase"] == "running"

            wait_until(requeued_and_running, 40, "the gang to be requeued and run again")
            again = job(http, "hit")
            assert lost not in again["allocation"]["nodes"]
            assert not first & {p.metadata.name for p in bound_pods(core, "hit")}
            history = " ".join(change["cause"] for change in again["history"])
            assert f"node {lost}" in history
        finally:
            core.patch_node(
                lost, {"metadata": {"labels": {"node-not-ready.stage.kwok.x-k8s.io": None}}}
            )


def test_a_server_killed_with_pods_running_adopts_them_when_it_comes_back(
    k8s_bed: KubernetesBed, core: Any, policy_file: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with ExitStack() as stack:
        server = stack.enter_context(
            running_server(data, *server_options(k8s_bed), policy=policy_file)
        )
        http = api(server)
        submit(http, "kept", 2)
        wait_until(lambda: phase_is(http, "kept", "running"), 30, "the gang to run")
        before = {p.metadata.name: p.metadata.uid for p in bound_pods(core, "kept")}
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    time.sleep(1)
    with running_server(data, *server_options(k8s_bed), policy=policy_file) as again:
        http = api(again)
        time.sleep(2)  # a few steps
        found = job(http, "kept")
        assert found["phase"] == "running"
        assert "restarted" not in " ".join(change["cause"] for change in found["history"])
        assert {p.metadata.name: p.metadata.uid for p in bound_pods(core, "kept")} == before
