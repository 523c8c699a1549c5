"""Tests against a real Kubernetes control plane (``topoq.testbeds.kubernetes``): one bed of
16 KWOK nodes with Kueue for the session, on the default loopback ports, stopped by PID at the
end, also when tests fail. The programs come from ``TOPOQ_K8S_ASSETS`` (``.ci/run`` unpacks
the project's test-bed tarball and sets it); without it these tests are skipped — except under
CI, where they fail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from tests.executors.launches import SHAPE, wait_until
from tests.k8s.cluster_objects import OTHER_TEAM, TEAM, Servers, admin
from topoq.testbeds.kubernetes import (
    ASSETS_ENV,
    BedShape,
    KubernetesBed,
    bring_up,
    node_documents,
    tear_down,
)
from topoq.testing.governance import gpu_cluster

BED_NODES = 16
CONTRACT_SET = ("topoq.io/bed-set", "contract")
"""The label of the four nodes named and labelled as the executor contract's cluster."""


def assets_or_skip() -> Path:
    given = os.environ.get(ASSETS_ENV)
    if not given:
        reason = f"no Kubernetes test bed: set {ASSETS_ENV} to the unpacked k8s-test-bed.tar.xz"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return Path(given)


@pytest.fixture(scope="session")
def k8s_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubernetesBed]:
    assets = assets_or_skip()
    directory = tmp_path_factory.mktemp("k8s-bed")
    try:
        yield bring_up(directory, BedShape(BED_NODES, 3), kueue=True, assets=assets)
    finally:
        tear_down(directory)


@pytest.fixture(scope="session")
def contract_nodes(k8s_bed: KubernetesBed) -> list[str]:
    core = client.CoreV1Api(k8s_bed.api_client())
    nodes, _ = gpu_cluster(SHAPE)
    names = []
    for document in node_documents(nodes):
        document["metadata"]["labels"][CONTRACT_SET[0]] = CONTRACT_SET[1]
        core.create_node(document)
        names.append(document["metadata"]["name"])

    def ready() -> bool:
        listed = core.list_node(label_selector="=".join(CONTRACT_SET)).items
        return len(listed) == len(names) and all(
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or ())
            for n in listed
        )

    wait_until(ready, timeout_s=30, what="the contract's nodes")
    return names


@pytest.fixture(scope="module")
def objects_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubernetesBed]:
    """The bed of the tests of the cluster's own objects (``tests.k8s.cluster_objects``): one
    per module, stopped once the module is done (an idle bed left up costs the rest of the
    run CPU)."""
    assets = assets_or_skip()
    directory = tmp_path_factory.mktemp("k8s-objects-bed")
    try:
        yield bring_up(directory, BedShape(8, 3), assets=assets, ports="free")
    finally:
        tear_down(directory)


@pytest.fixture(scope="module")
def servers(
    objects_bed: KubernetesBed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    for namespace in (TEAM, OTHER_TEAM):
        client.CoreV1Api(objects_bed.api_client()).create_namespace(
            {"metadata": {"name": namespace}}
        )
    running = Servers(objects_bed, tmp_path_factory.mktemp("k8s-objects-server"))
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def http(servers: Servers) -> Iterator[httpx.Client]:
    with admin(servers.current) as found:
        yield found
