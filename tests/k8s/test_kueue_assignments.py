"""Topology assignments as real Kueue writes them: a suspended Indexed Job with a required
topology is admitted by Kueue (TAS on), and the assignment it records reads as the domains
its pods run in."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.executors.launches import wait_until
from topoq.discovery.kueue_assignment import read_assignment, v1beta2_document
from topoq.testbeds.kubernetes import KubernetesBed

NAME = "assign-test"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
LAYER_2 = "topology.k8s.aws/network-node-layer-2"
LEVELS = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)] + [
    "kubernetes.io/hostname"
]


def kueue_object(kind: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": NAME}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata, "spec": spec}


@pytest.fixture
def kueue_objects_removed_after(k8s_bed: KubernetesBed) -> Iterator[None]:
    """What the test makes is gone again before the next test (its Job's pods hold GPUs
    that other tests' inventories would miss, its queue would be imported by theirs)."""
    yield
    api = k8s_bed.api_client()
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    with contextlib.suppress(ApiException):
        core.delete_namespace(NAME)
    wait_until(lambda: not _exists(lambda: core.read_namespace(NAME)), 60, "the namespace to go")
    for plural in ("clusterqueues", "resourceflavors", "topologies"):
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, plural, NAME)
        wait_until(
            lambda plural=plural: (
                not _exists(lambda: custom.get_cluster_custom_object(GROUP, VERSION, plural, NAME))
            ),
            60,
            f"the {plural} to go",
        )


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.mark.usefixtures("kueue_objects_removed_after")
def test_the_assignment_real_kueue_writes_reads_as_the_domains_it_chose(
    k8s_bed: KubernetesBed,
) -> None:
    api = k8s_bed.api_client()
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "topologies",
        kueue_object("Topology", {"levels": [{"nodeLabel": level} for level in LEVELS]}),
    )
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "resourceflavors",
        kueue_object("ResourceFlavor", {"nodeLabels": {"type": "kwok"}, "topologyName": NAME}),
    )
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "clusterqueues",
        kueue_object(
            "ClusterQueue",
            {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": NAME,
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 128}],
                            }
                        ],
                    }
                ],
            },
        ),
    )
    core.create_namespace({"metadata": {"name": NAME}})
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NAME,
        "localqueues",
        kueue_object("LocalQueue", {"clusterQueue": NAME}, NAME),
    )
    client.BatchV1Api(api).create_namespaced_job(
        NAME,
        {
            "metadata": {"name": "pair", "labels": {"kueue.x-k8s.io/queue-name": NAME}},
            "spec": {
                "suspend": True,
                "completionMode": "Indexed",
                "parallelism": 2,
                "completions": 2,
                "template": {
                    "metadata": {
                        "annotations": {"kueue.x-k8s.io/podset-required-topology": LAYER_2}
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": "8"},
                                    "limits": {"nvidia.com/gpu": "8"},
                                },
                            }
                        ],
                    },
                },
            },
        },
    )

    def assignment() -> dict[str, Any] | None:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, NAME, "workloads")["items"]
        for workload in listed:
            for pod_set in (workload.get("status", {}).get("admission") or {}).get(
                "podSetAssignments", []
            ):
                if pod_set.get("topologyAssignment"):
                    return dict(pod_set["topologyAssignment"])
        return None

    wait_until(lambda: assignment() is not None, 60, "Kueue to admit the Job")
    written = assignment()
    assert written is not None and "slices" in written  # v1beta2's form
    read = read_assignment(written)
    hosts = [d.values[-1] for d in read.domains]
    assert sum(d.pods for d in read.domains) == 2
    nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    assert all(host in nodes for host in hosts)
    assert len({nodes[host][LAYER_2] for host in hosts}) == 1  # one layer-2 domain, as required
    assert read_assignment(v1beta2_document(read)) == read
    assert v1beta2_document(read) == written  # written as Kueue writes it
