"""A job is charged to the policy's class its priority class names: the class itself, else
for HyperPod's ``<class>-priority`` naming the class without the suffix (the rule
``topoq policy lint`` reports by, core.priority_classes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topoq.api.submission import job_from_request
from topoq.discovery.documents import read_document
from topoq.discovery.policy import load_policy
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, PriorityClass
from topoq.domain.topology import TopologySpec
from topoq.wire.v1 import JobFormat, SubmitJobRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICY = load_policy(EXAMPLES / "policies" / "policy.yaml")
LEVELS = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)]
TOPOLOGY = TopologySpec("t", (*LEVELS, "kubernetes.io/hostname"))
NODE = {"nvidia.com/gpu": 8, "cpu": 192_000, "memory": 2 * 2**40, "vpc.amazonaws.com/efa": 32}


def charged(
    document: dict[str, Any], job_format: JobFormat, policy: ClusterPolicy, **extra: Any
) -> str | None:
    request = SubmitJobRequest(format=job_format, document=document, **extra)
    spec = job_from_request(
        request,
        policy=policy,
        topology=TOPOLOGY,
        largest_node=NODE,
        user="u",
        now=0.0,
        stored_phases=lambda ids: {},
    )
    return spec.priority_class


def hyperpod_job(priority: str) -> dict[str, Any]:
    document = read_document(EXAMPLES / "workloads" / "hyperpod-pytorch-job.yaml")
    return {**document, "priority": priority}


@pytest.mark.parametrize(
    ("written", "policy_class"),
    [
        ("training-priority", "training"),
        ("inference-priority", "inference"),
        ("training", "training"),
    ],
)
def test_a_hyperpod_class_name_is_charged_to_the_policys_class(
    written: str, policy_class: str
) -> None:
    assert charged(hyperpod_job(written), JobFormat.HYPERPOD, POLICY) == policy_class


def test_a_kubernetes_manifests_priority_class_label_maps_alike() -> None:
    document = read_document(EXAMPLES / "kubernetes" / "jobs" / "indexed-job.yaml")
    assert document["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "training-priority"
    assert charged(document, JobFormat.KUBERNETES, POLICY) == "training"


def test_a_class_literally_named_with_the_suffix_is_that_class() -> None:
    classes = (*POLICY.priority_classes, PriorityClass("training-priority", 50))
    policy = ClusterPolicy(teams=POLICY.teams, priority_classes=classes)
    assert charged(hyperpod_job("training-priority"), JobFormat.HYPERPOD, policy) == (
        "training-priority"
    )


def test_the_override_maps_alike_and_an_unknown_class_is_refused() -> None:
    job = hyperpod_job("training-priority")
    assert charged(job, JobFormat.HYPERPOD, POLICY, priority_class="experiment-priority") == (
        "experiment"
    )
    with pytest.raises(InvalidInputError) as raised:
        charged(hyperpod_job("batch-priority"), JobFormat.HYPERPOD, POLICY)
    assert raised.value.message == "priority class 'batch-priority' is not defined"
    assert "experiment, inference, training" in (raised.value.hint or "")
