"""HyperPodPyTorchJob and Kubeflow PyTorchJob manifests read as the workloads they describe."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.discovery.jobfile import load_workload, workload_from_document
from topoq.domain.errors import InvalidInputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "training"
LAYER_2 = "topology.k8s.aws/network-node-layer-2"


def test_a_hyperpod_pytorch_job_is_one_pod_set_per_replica_spec() -> None:
    workload = load_workload(EXAMPLES / "hyperpod-pytorch-job.yaml")
    assert workload.name == "llama-pretrain-hyperpod"
    assert workload.namespace == "hyperpod-ns-vision"
    assert workload.queue == "hyperpod-ns-vision-localqueue"
    assert workload.priority_class == "training-priority"
    [pods] = workload.pod_sets
    assert (pods.name, pods.count) == ("pod", 4)
    assert pods.requests.amount("nvidia.com/gpu") == 8
    assert pods.requests.amount("vpc.amazonaws.com/efa") == 32
    assert pods.topology.required == LAYER_2
    assert pods.command == ("torchrun", "train.py")


def test_a_kubeflow_pytorch_job_is_a_master_and_workers() -> None:
    workload = load_workload(EXAMPLES / "kubeflow-pytorch-job.yaml")
    assert [(p.name, p.count) for p in workload.pod_sets] == [("master", 1), ("worker", 3)]
    assert all(p.topology.preferred == LAYER_2 for p in workload.pod_sets)
    assert all(p.requests.amount("nvidia.com/gpu") == 8 for p in workload.pod_sets)
    assert workload.queue == "vision" and workload.priority_class is None


def test_the_objects_annotation_stands_in_for_the_templates() -> None:
    workload = workload_from_document(
        {
            "apiVersion": "sagemaker.amazonaws.com/v1",
            "kind": "HyperPodPyTorchJob",
            "metadata": {
                "name": "j",
                "annotations": {"kueue.x-k8s.io/podset-required-topology": LAYER_2},
            },
            "spec": {
                "replicaSpecs": [
                    {"name": "pod", "template": {"spec": {"containers": [{"name": "c"}]}}}
                ]
            },
        },
        source="job.yaml",
    )
    [pods] = workload.pod_sets
    assert pods.count == 1 and pods.topology.required == LAYER_2


def test_a_job_with_no_replicas_says_so() -> None:
    no_replicas = r"job\.yaml: spec\.pytorchReplicaSpecs: no replicas"
    with pytest.raises(InvalidInputError, match=no_replicas):
        workload_from_document(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "j"},
                "spec": {},
            },
            source="job.yaml",
        )
