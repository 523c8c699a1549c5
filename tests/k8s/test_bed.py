"""The project's own bring-up of a real control plane: nodes as HyperPod labels them, token
authentication and RBAC in force, Kueue's webhooks answering, ports checked, and exactly the
started processes stopped."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.k8s.conftest import BED_NODES, assets_or_skip
from topoq.testbeds.daemons import BedError, DaemonExited, recorded, start_time
from topoq.testbeds.kubernetes import (
    ASSETS_ENV,
    BedShape,
    KubernetesBed,
    Ports,
    bring_up,
    tear_down,
)

LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))


def test_the_nodes_are_ready_with_hyperpod_labels_and_gpus(k8s_bed: KubernetesBed) -> None:
    nodes = client.CoreV1Api(k8s_bed.api_client()).list_node().items
    assert sorted(n.metadata.name for n in nodes) == sorted(k8s_bed.nodes)
    assert len(nodes) == BED_NODES
    for node in nodes:
        labels = node.metadata.labels
        assert all(layer in labels for layer in LAYERS)
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True"
    # 16 nodes under 3 layers: 2 x 2 x 2 domains of 2 nodes
    assert len({n.metadata.labels[LAYERS[0]] for n in nodes}) == 2
    assert len({n.metadata.labels[LAYERS[2]] for n in nodes}) == 8
    assert k8s_bed.topology_levels == (*LAYERS, "kubernetes.io/hostname")


def test_requests_need_a_token_and_rbac_decides(k8s_bed: KubernetesBed) -> None:
    anonymous = client.CoreV1Api(k8s_bed.api_client(token="not-a-token"))
    with pytest.raises(ApiException) as refused:
        anonymous.list_node()
    assert refused.value.status == 401
    topoq = client.CoreV1Api(k8s_bed.api_client(token=k8s_bed.topoq_token))
    with pytest.raises(ApiException) as forbidden:
        topoq.list_namespaced_pod("default")
    assert forbidden.value.status == 403  # a user RBAC grants nothing


def test_kueue_serves_its_objects_through_its_webhooks(k8s_bed: KubernetesBed) -> None:
    custom = client.CustomObjectsApi(k8s_bed.api_client())
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "bed-test-flavor"},
        "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
    }
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", flavor)
    try:
        bad = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "bed-test-bad"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "bed-test-flavor",
                                "resources": [{"name": "cpu", "nominalQuota": 8}],
                            }
                        ],
                    }
                ]
            },
        }
        with pytest.raises(ApiException) as refused:
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", bad)
        assert refused.value.status == 403
        message = json.loads(refused.value.body)["message"]
        assert message.startswith('admission webhook "vclusterqueue.kb.io" denied')
    finally:
        custom.delete_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "resourceflavors", "bed-test-flavor"
        )


def test_a_second_bed_on_taken_ports_is_refused_and_starts_nothing(
    k8s_bed: KubernetesBed, tmp_path: Path
) -> None:
    with pytest.raises(BedError, match="6443"):
        bring_up(tmp_path / "second", BedShape(2, 1), assets=assets_or_skip())
    assert recorded(tmp_path / "second") == {}


def test_down_stops_exactly_the_processes_it_started(
    k8s_bed: KubernetesBed, tmp_path: Path
) -> None:
    ports = Ports.free()
    directory = tmp_path / "own-ports"
    bed = bring_up(directory, BedShape(4, 1), assets=assets_or_skip(), ports=ports)
    try:
        assert bed.server.endswith(f":{ports.apiserver}")
        assert len(client.CoreV1Api(bed.api_client()).list_node().items) == 4
        started = recorded(directory)
        assert set(started) == {"etcd", "apiserver", "controller-manager", "scheduler", "kwok"}
        assert all(start_time(d.pid) == d.started for d in started.values())
    finally:
        stopped = tear_down(directory)
    assert set(stopped) == set(started)
    assert all(start_time(d.pid) != d.started for d in started.values())
    # the session's bed was left alone
    assert len(client.CoreV1Api(k8s_bed.api_client()).list_node().items) == BED_NODES
    assert tear_down(directory) == []


@contextmanager
def bound_not_listening(port: int) -> Iterator[None]:
    """Another program's socket bound to ``port`` without listening yet: a connection to the
    port is refused (so it looks free), but a daemon cannot bind it."""
    taker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taker.bind(("127.0.0.1", port))
        yield
    finally:
        taker.close()


def test_a_daemon_that_cannot_bind_its_port_is_an_error_at_once_and_nothing_stays_up(
    k8s_bed: KubernetesBed, tmp_path: Path
) -> None:
    """CI once saw the controller manager exit at start ("address already in use") and the
    bed come up without it: no Job controller, no pods, a benchmark waiting half an hour."""
    ports = Ports.free()
    directory = tmp_path / "taken"
    began = time.monotonic()
    with (
        bound_not_listening(ports.controller_manager),
        pytest.raises(DaemonExited) as exited,
    ):
        bring_up(directory, BedShape(2, 1), assets=assets_or_skip(), ports=ports)
    assert time.monotonic() - began < 60  # not the 120 s deadline
    assert exited.value.port_taken
    assert "controller-manager" in str(exited.value)
    assert f"127.0.0.1:{ports.controller_manager}" in str(exited.value)  # the log's own line
    assert recorded(directory) == {}  # etcd and the API server were stopped again


def test_free_ports_are_picked_again_when_one_is_taken_after_the_choice(
    k8s_bed: KubernetesBed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Ports.free()
    choices = iter([first])
    choose = Ports.free
    monkeypatch.setattr(Ports, "free", classmethod(lambda cls: next(choices, None) or choose()))
    directory = tmp_path / "picked-again"
    with bound_not_listening(first.scheduler):
        bed = bring_up(directory, BedShape(2, 1), assets=assets_or_skip(), ports="free")
    try:
        assert bed.ports != first
        assert set(recorded(directory)) == {
            "etcd",
            "apiserver",
            "controller-manager",
            "scheduler",
            "kwok",
        }
        assert len(client.CoreV1Api(bed.api_client()).list_node().items) == 2
        assert "address already in use" in (directory / "scheduler.log").read_text()
    finally:
        tear_down(directory)


def test_free_ports_are_distinct() -> None:
    for _ in range(50):
        ports = Ports.free()
        assert len(set(vars(ports).values())) == len(vars(ports))


def test_without_the_programs_the_cli_says_where_to_get_them(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != ASSETS_ENV}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "topoq"), "dev", "k8s", "up", str(tmp_path / "bed")],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert ASSETS_ENV in done.stderr and "setup-envtest" in done.stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ["dev", "k8s", "up", "BED"],
        ["policy", "import", "--from", "kueue", "--live"],
    ],
)
def test_without_the_kubernetes_extra_the_cli_says_what_to_install(
    tmp_path: Path, arguments: list[str]
) -> None:
    argv = [a.replace("BED", str(tmp_path / "bed")) for a in arguments]
    program = (
        "import sys; sys.modules['kubernetes'] = None; "  # as if the extra were not installed
        "from topoq.cli.app import main; "
        f"sys.argv = ['topoq', *{argv!r}]; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "topoq[kubernetes]" in done.stderr
