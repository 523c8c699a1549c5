"""The API server killed and started again while a gang runs: the executor's watches come back
(from the last resourceVersion seen, or by listing again when it is gone), the gang's end is
still seen, and no pod is made twice. On a bed of its own (its own ports), so that the
session's bed is not disturbed."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from tests.executors.launches import SHAPE, gang, place, poll_until
from tests.k8s.conftest import assets_or_skip
from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.kubernetes.executor import KubernetesExecutor
from topoq.executors.kubernetes.manifests import job_selector
from topoq.testbeds.kubernetes import (
    BedShape,
    bring_up,
    node_documents,
    restart_apiserver,
    tear_down,
)
from topoq.testing.governance import gpu_cluster


def test_a_gang_outlives_an_api_server_restart_and_its_end_is_seen(tmp_path: Path) -> None:
    directory = tmp_path / "bed"
    bed = bring_up(directory, BedShape(1, 1), assets=assets_or_skip(), ports="free")
    try:
        core = client.CoreV1Api(bed.api_client())
        nodes, _ = gpu_cluster(SHAPE)
        for document in node_documents(nodes):
            core.create_node(document)
        placed = place(gang("survivor"))
        with KubernetesExecutor(api_client=bed.api_client(), node_selector="type=kwok") as executor:
            executor.start(placed.launch("survivor", environment={"TOPOQ_SLEEP_S": "12"}))
            started = poll_until(
                executor,
                lambda seen: any(e.kind is ExecutorEventKind.STARTED for e in seen),
                timeout_s=30,
            )
            pods = core.list_namespaced_pod("t", label_selector=job_selector(JobId("survivor")))
            uids = {p.metadata.uid for p in pods.items}
            assert len(uids) == 2
            restart_apiserver(bed)
            events = poll_until(
                executor,
                lambda seen: any(e.kind is ExecutorEventKind.EXITED for e in seen),
                timeout_s=60,
                seen=list(started),
            )
            ends = [(e.kind, e.exit_code) for e in events if e.job == "survivor"]
            assert ends == [(ExecutorEventKind.STARTED, None), (ExecutorEventKind.EXITED, 0)]
            after = core.list_namespaced_pod("t", label_selector=job_selector(JobId("survivor")))
            assert {p.metadata.uid for p in after.items} == uids  # none made twice
    finally:
        tear_down(directory)
