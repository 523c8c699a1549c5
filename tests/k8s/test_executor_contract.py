"""The executor contract against a real API server: the Kubernetes executor's pods are Pods
bound to the contract's nodes (four KWOK nodes named and labelled as the contract's cluster,
n00 … n03), and KWOK plays them as topoq's default workload (``testbeds.kwok_stages``): how
long they run, their exit code and how long they take to stop are the variables each
program of the contract maps to here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from kubernetes import client

from tests.executors.contract import (
    CHECKPOINT_ON_SIGTERM,
    IGNORE_SIGTERM,
    SAY_HELLO,
    ExecutorContract,
    ExecutorFactory,
)
from tests.executors.launches import gang, place, wait_until
from tests.k8s.conftest import CONTRACT_SET
from topoq.domain.job import JobId
from topoq.engine.ports import Executor
from topoq.executors.kubernetes.executor import KubernetesExecutor
from topoq.executors.kubernetes.manifests import MANAGED_SELECTOR, job_selector
from topoq.testbeds.kubernetes import KubernetesBed
from topoq.testing.builders import gpu_pods

NAMESPACE = "t"  # the contract's team
TRAINER = "trainer:1"


class TestKubernetesContract(ExecutorContract):
    @pytest.fixture
    def executor_factory(
        self, k8s_bed: KubernetesBed, contract_nodes: list[str]
    ) -> ExecutorFactory:
        return lambda _work_dir: KubernetesExecutor(
            api_client=k8s_bed.api_client(),
            node_selector="=".join(CONTRACT_SET),
            stop_grace_s=1.0,
        )

    @pytest.fixture(autouse=True)
    def no_pods_left(self, k8s_bed: KubernetesBed) -> Iterator[None]:
        self.core = client.CoreV1Api(k8s_bed.api_client())
        yield
        self.core.delete_collection_namespaced_pod(
            NAMESPACE, label_selector=MANAGED_SELECTOR, grace_period_seconds=0
        )
        self.core.delete_collection_namespaced_service(NAMESPACE, label_selector=MANAGED_SELECTOR)

    # --- the hooks: pods are Pods, played by KWOK --------------------------------------
    def pod_environment(self, code: str) -> dict[str, str]:
        if code == SAY_HELLO:
            return {"TOPOQ_SLEEP_S": "0.5"}
        if code == CHECKPOINT_ON_SIGTERM:
            return {"TOPOQ_SLEEP_S": "3600", "TOPOQ_STOP_S": "1"}
        if code == IGNORE_SIGTERM:
            return {"TOPOQ_SLEEP_S": "3600", "TOPOQ_STOP_S": "3600"}
        return {"TOPOQ_SLEEP_S": "3600"}  # sleeps

    def trigger_failure(self, executor: Executor, job: str, pod_set: str, trigger: Path) -> None:
        [pod] = self._pods(job, f"topoq.io/pod-set={pod_set}")
        self.core.patch_namespaced_pod(
            pod.metadata.name,
            NAMESPACE,
            {
                "metadata": {
                    "labels": {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"},
                    "annotations": {
                        "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": "3",
                        "pod-container-running-failed.stage.kwok.x-k8s.io/delay": "0s",
                    },
                }
            },
        )

    def pod_pids(self, executor: Executor, job: str) -> list[int]:
        """Stand-ins for pids: the pods' creation counters (``alive`` finds them again)."""
        return [int(pod.metadata.resource_version) for pod in self._pods(job)]

    def alive(self, pid: int) -> bool:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=MANAGED_SELECTOR).items
        return any(int(pod.metadata.resource_version) == pid for pod in pods)

    def still_running(self, executor: Executor, job: str) -> bool:
        return bool(self._pods(job))

    def wait_for_pods(self, executor: Executor, job: str, pods: int) -> None:
        wait_until(
            lambda: sum(p.status.phase == "Running" for p in self._pods(job)) == pods,
            timeout_s=20,
            what=f"{pods} running pods",
        )

    def _pods(self, job: str, more: str = "") -> list[client.V1Pod]:
        selector = job_selector(JobId(job)) + (f",{more}" if more else "")
        return list(self.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items)


def test_pods_land_on_exactly_the_placed_nodes_with_ranks_and_environment(
    k8s_bed: KubernetesBed, contract_nodes: list[str]
) -> None:
    placed = place(gang("land", replace(gpu_pods(2, gpus=8), image=TRAINER)))
    core = client.CoreV1Api(k8s_bed.api_client())
    with KubernetesExecutor(
        api_client=k8s_bed.api_client(), node_selector="=".join(CONTRACT_SET)
    ) as executor:
        executor.start(placed.launch("land", environment={"TOPOQ_SLEEP_S": "3600", "MINE": "x"}))
        wait_until(
            lambda: (
                len(
                    [
                        p
                        for p in core.list_namespaced_pod(
                            "t", label_selector=job_selector(JobId("land"))
                        ).items
                        if p.spec.node_name
                    ]
                )
                == 2
            ),
            timeout_s=20,
            what="two bound pods",
        )
        pods = core.list_namespaced_pod("t", label_selector=job_selector(JobId("land"))).items
        by_rank = {int(p.metadata.labels["topoq.io/rank"]): p for p in pods}
        plans = placed.allocation("land").placement.pod_sets[0].assignments
        placed_nodes = sorted(a.node for a in plans)
        assert sorted(p.spec.node_name for p in pods) == placed_nodes
        for rank, pod in by_rank.items():
            env = {e.name: e.value for e in pod.spec.containers[0].env}
            assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "2"
            assert env["TOPOQ_NODE"] == pod.spec.node_name
            assert env["MASTER_ADDR"] == "land-a1-0.land-a1.t.svc"
            assert env["MINE"] == "x"
            assert "CUDA_VISIBLE_DEVICES" not in env
            assert pod.spec.scheduler_name == "topoq"
            assert pod.spec.containers[0].image == TRAINER  # the pod set's, not the default
            assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "8"
        service = core.read_namespaced_service("land-a1", "t")
        assert service.spec.cluster_ip == "None"
        executor.cancel(JobId("land"))
        time.sleep(0.1)
        assert core.list_namespaced_pod("t", label_selector=job_selector(JobId("land"))).items == []
