"""An in-process API over a real SQLite store, a scripted executor and the tests' cluster, with
a token per role (the role test and the fast route tests use it; tests/api/test_server.py runs
the real server process)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from topoq.api.app import create_app
from topoq.api.service import Service
from topoq.discovery.policy import load_policy
from topoq.discovery.sources import load_cluster
from topoq.engine.controller import Controller
from topoq.engine.ports import JobLog, LogRequest
from topoq.store.sql_store import SqlStore, open_store
from topoq.testing.fakes import ScriptedExecutor
from topoq.wire.v1 import Role

HERE = Path(__file__).parent
EXAMPLES = HERE.parent.parent / "examples" / "workloads"
CLUSTER_FILE = HERE / "cluster.yaml"
POLICY_FILE = HERE / "policy.yaml"
TEAM = "nlp"
OTHER_TEAM = "vision"


class Clock:
    def __init__(self) -> None:
        self._ticks = itertools.count(1_000_000)

    def __call__(self) -> float:
        return float(next(self._ticks))


@dataclass
class Api:
    client: TestClient
    service: Service
    store: SqlStore
    executor: ScriptedExecutor
    controller: Controller
    """Not run by the API: a test steps it, as the controller process would."""
    tokens: dict[str, str]
    """Bearer token by name: one per role for team nlp ("admin", "team-admin", "member",
    "viewer"), and "outsider", a member of vision."""

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    yield from make_api(tmp_path)


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One API for a whole module (tests that do not mind each other's state)."""
    yield from make_api(tmp_path_factory.mktemp("api"))


def _no_output(request: LogRequest) -> JobLog:
    """The scripted executor's pods print nothing."""
    return JobLog(request.job, 1, request.pod, pods=())


def make_api(data_dir: Path) -> Iterator[Api]:
    store = open_store(None, data_dir)
    cluster = load_cluster(CLUSTER_FILE)
    store.save_nodes(cluster.nodes, actor="test", now=0)
    store.save_policy(load_policy(POLICY_FILE), actor="test", now=0)
    executor = ScriptedExecutor()
    clock = Clock()
    controller = Controller(store, executor, cluster.topology, clock=clock)
    service = Service(store, cluster.topology, clock=clock, logs=_no_output)
    tokens = {role.value: store.create_token(role.value, role.value, [TEAM])[0] for role in Role}
    tokens["outsider"] = store.create_token("outsider", Role.MEMBER.value, [OTHER_TEAM])[0]
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        yield Api(client, service, store, executor, controller, tokens)
    store.close()


def small_job(name: str, *, pods: int = 2, team: str | None = None) -> dict[str, object]:
    """A submission body: a topoq job of ``pods`` whole nodes in one block."""
    body: dict[str, object] = {
        "format": "topoq",
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": f"hyperpod-ns-{TEAM}"},
            "spec": {
                "podSets": [
                    {
                        "name": "workers",
                        "count": pods,
                        "requests": {"nvidia.com/gpu": 8},
                        "topology": {"required": "topology.k8s.aws/network-node-layer-3"},
                    }
                ]
            },
        },
    }
    if team is not None:
        body["team"] = team
    return body


def waits_forever(name: str) -> dict[str, object]:
    """A job the cluster could hold but its team never may: 7 whole nodes (56 GPUs) over nlp's
    32 guaranteed plus 16 borrowable. It is accepted and waits (NEVER_FITS_CURRENT_POLICY);
    one the cluster itself could never hold is refused at submission."""
    body = small_job(name, pods=7)
    del body["document"]["spec"]["podSets"][0]["topology"]  # type: ignore[index]
    return body


def fitted_example(job_format: str, document: dict[str, Any]) -> dict[str, Any]:
    """An example workload (written for a larger cluster) cut to the tests' 8 nodes, still over
    nlp's 48 GPUs so that it waits: 7 worker nodes, nothing more than one block must hold."""
    if job_format == "hyperpod":
        kept = {key: value for key, value in document.items() if key != "required_topology"}
        return kept | {"node_count": 7}
    if job_format == "kubernetes":  # a batch/v1 Job
        spec = document["spec"]
        spec |= {"parallelism": 7, "completions": 7}
        annotations = spec["template"]["metadata"]["annotations"]
        annotations["kueue.x-k8s.io/podset-required-topology"] = (
            "topology.k8s.aws/network-node-layer-1"
        )
        return document
    if job_format == "kueue":
        pod_set = document["spec"]["podSets"][0]
        annotations = pod_set["template"]["metadata"]["annotations"]
        layer_1 = "topology.k8s.aws/network-node-layer-1"
        pod_set |= {"count": 7}
        annotations["kueue.x-k8s.io/podset-required-topology"] = layer_1
        return document
    launcher, workers = document["spec"]["podSets"][:2]
    topology = {key: value for key, value in workers["topology"].items() if key != "slices"}
    workers = workers | {"count": 7, "topology": topology}
    document["spec"]["podSets"] = [launcher, workers]
    return document
