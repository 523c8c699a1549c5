"""deploy/kubernetes/ against the real API server (RBAC on): the manifests are accepted, and
the ClusterRole they grant is enough for the Kubernetes executor to run a gang — and grants
nothing more (requests outside it are refused by the API server)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.executors.launches import gang, place, poll_until
from tests.k8s.conftest import CONTRACT_SET, assets_or_skip
from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.kubernetes.executor import KubernetesExecutor
from topoq.testbeds.kubernetes import KubernetesBed

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def kubectl(bed: KubernetesBed, *arguments: str) -> subprocess.CompletedProcess[str]:
    program = assets_or_skip() / "bin" / "kubectl"
    return subprocess.run(
        [str(program), f"--kubeconfig={bed.kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def rbac_for_topoq_user(k8s_bed: KubernetesBed) -> None:
    applied = kubectl(k8s_bed, "apply", "--server-side", "-f", str(DEPLOY / "rbac.yaml"))
    assert applied.returncode == 0, applied.stderr
    rbac = client.RbacAuthorizationV1Api(k8s_bed.api_client())
    rbac.create_cluster_role_binding(  # the bed's user "topoq" stands for the ServiceAccount
        {
            "metadata": {"name": "topoq-scheduler-bed-user"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "topoq-scheduler",
            },
            "subjects": [
                {"kind": "User", "name": "topoq", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        }
    )


def test_the_server_manifests_are_accepted(
    k8s_bed: KubernetesBed, rbac_for_topoq_user: None
) -> None:
    done = kubectl(
        k8s_bed, "apply", "--server-side", "--dry-run=server", "-f", str(DEPLOY / "server.yaml")
    )
    assert done.returncode == 0, done.stderr
    assert "deployment.apps/topoq serverside-applied (server dry run)" in done.stdout


def test_the_role_is_enough_to_run_a_gang_and_grants_nothing_more(
    k8s_bed: KubernetesBed, contract_nodes: list[str], rbac_for_topoq_user: None
) -> None:
    as_topoq = k8s_bed.api_client(token=k8s_bed.topoq_token)
    placed = place(gang("rbac", team_name="rbac-team"))
    with KubernetesExecutor(api_client=as_topoq, node_selector="=".join(CONTRACT_SET)) as executor:
        assert executor.inventory_changes()  # it reads the nodes
        executor.start(placed.launch("rbac", environment={"TOPOQ_SLEEP_S": "0.5"}))
        events = poll_until(
            executor,
            lambda seen: any(e.kind is ExecutorEventKind.EXITED for e in seen),
            timeout_s=30,
        )
        assert [(e.kind, e.exit_code) for e in events if e.job == "rbac"] == [
            (ExecutorEventKind.STARTED, None),
            (ExecutorEventKind.EXITED, 0),
        ]
        executor.cancel(JobId("rbac"))
    core = client.CoreV1Api(as_topoq)
    refused = [
        core.list_secret_for_all_namespaces,
        lambda: core.delete_node(contract_nodes[0]),
        lambda: core.patch_node(contract_nodes[0], {"spec": {"unschedulable": True}}),
        lambda: client.AppsV1Api(as_topoq).list_deployment_for_all_namespaces(),
        lambda: core.create_namespaced_config_map("rbac-team", {"metadata": {"name": "x"}}),
        lambda: client.BatchV1Api(as_topoq).delete_collection_namespaced_job("rbac-team"),
        lambda: client.BatchV1Api(as_topoq).delete_namespaced_job("x", "rbac-team"),
    ]
    for request in refused:
        with pytest.raises(ApiException) as error:
            request()
        assert error.value.status == 403
