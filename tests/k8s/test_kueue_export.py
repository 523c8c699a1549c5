"""``topoq policy export --to kueue`` against real Kueue (its CRDs and validating webhooks
running): every object is accepted, and Kueue reports every ClusterQueue Active."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.executors.launches import wait_until
from tests.k8s.test_deploy_manifests import kubectl
from topoq.discovery.policy import load_policy
from topoq.domain.governance import TeamSpec
from topoq.testbeds.kubernetes import KubernetesBed

POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: kueue-export}
scheduling:
  priorityClasses:
  - {name: inference, weight: 100}
  - {name: training, weight: 10}
  defaultPriorityClass: training
  idleResourceSharing: true
cohorts:
- name: org
- name: research
  parent: [org]
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 2}
teams:
- name: vision
  cohort: [org, research]
  fairShareWeight: 2
  sharing: LendAndBorrow
  borrowLimitPercent: 50
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 4}
- name: nlp
  cohort: [org, research]
  sharing: DontLend
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 4}
- name: infra
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 2}
"""


def bed_nodes(bed: KubernetesBed, directory: Path) -> Path:
    """The bed's own nodes as ``kubectl get nodes -o json`` prints them."""
    listed = client.CoreV1Api(bed.api_client()).list_node(
        label_selector="type=kwok,!topoq.io/bed-set"
    )
    nodes = directory / "nodes.json"
    nodes.write_text(json.dumps(bed.api_client().sanitize_for_serialization(listed)))
    return nodes


def test_the_exported_policy_is_accepted_by_kueue_and_every_queue_is_active(
    k8s_bed: KubernetesBed, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    nodes = bed_nodes(k8s_bed, tmp_path)
    exported = tmp_path / "kueue.yaml"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "topoq"),
            "policy",
            "export",
            "--to",
            "kueue",
            "--policy",
            str(policy),
            "--nodes",
            str(nodes),
            "--out",
            str(exported),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    applied = kubectl(k8s_bed, "apply", "--server-side", "-f", str(exported))
    assert applied.returncode == 0, applied.stderr
    assert "Warning" not in applied.stderr  # no deprecated version
    custom = client.CustomObjectsApi(k8s_bed.api_client())

    def queues() -> dict[str, str]:
        found = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        return {
            q["metadata"]["name"]: next(
                (
                    c["status"]
                    for c in q.get("status", {}).get("conditions", [])
                    if c["type"] == "Active"
                ),
                "",
            )
            for q in found["items"]
            if q["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "topoq"
        }

    wait_until(
        lambda: set(queues().values()) == {"True"} and len(queues()) == 3, 30, "Active queues"
    )
    assert set(queues()) == {"vision", "nlp", "infra"}
    vision = custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision"
    )
    assert vision["spec"]["cohortName"] == "research"
    assert str(vision["spec"]["fairSharing"]["weight"]) == "2"
    [gpu] = [
        r
        for r in vision["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        if r["name"] == "nvidia.com/gpu"
    ]
    assert gpu["nominalQuota"] == "32" and gpu["borrowingLimit"] == "16"
    flavor = custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "resourceflavors", "p5.48xlarge"
    )
    assert flavor["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    research = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "cohorts", "research")
    assert research["spec"]["parentName"] == "org"
    local = custom.get_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "nlp", "localqueues", "nlp"
    )
    assert local["spec"]["clusterQueue"] == "nlp"


def test_export_apply_import_gives_back_the_same_policy(
    k8s_bed: KubernetesBed, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    topoq = str(Path(sys.executable).parent / "topoq")
    exported = tmp_path / "kueue.yaml"
    export = [topoq, "policy", "export", "--to", "kueue", "--policy", str(policy)]
    export += ["--nodes", str(bed_nodes(k8s_bed, tmp_path)), "--out", str(exported)]
    subprocess.run(export, check=True)
    applied = kubectl(k8s_bed, "apply", "--server-side", "-f", str(exported))
    assert applied.returncode == 0, applied.stderr
    imported = tmp_path / "imported.yaml"
    done = subprocess.run(
        [
            topoq,
            "policy",
            "import",
            "--from",
            "kueue",
            "--live",
            "--kubeconfig",
            str(k8s_bed.kubeconfig),
            "--out",
            str(imported),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    original, back = load_policy(policy), load_policy(imported)
    assert sorted(back.teams, key=by_name) == sorted(original.teams, key=by_name)  # API order
    assert back.cohorts == original.cohorts
    assert back.priority_classes == original.priority_classes


def by_name(team: TeamSpec) -> str:
    return str(team.name)
