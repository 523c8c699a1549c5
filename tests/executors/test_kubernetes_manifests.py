"""The Pods the Kubernetes executor writes for a placed gang (pure; the same against a real API
server: tests/k8s/test_executor_contract.py): each pod's container image and command."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.executors.launches import gang, place
from topoq.engine.ports import ExecutorStartFailed
from topoq.executors.kubernetes.manifests import DEFAULT_IMAGE, PodOptions, gang_manifests
from topoq.executors.kubernetes.plugin import KUBERNETES_CAPABILITIES
from topoq.executors.local import LOCAL_CAPABILITIES
from topoq.testing.builders import gpu_pods

WORKLOAD = "print('the default workload')"
PYTORCH = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"


def containers(
    *pod_sets: Any, commands: dict[str, tuple[str, ...]] | None = None, **options: Any
) -> dict[str, dict[str, Any]]:
    """The main container of each pod set's first pod, by pod-set name."""
    placed = place(gang("img", *pod_sets))
    manifests = gang_manifests(
        placed.launch("img", commands=commands), PodOptions(**options), WORKLOAD
    )
    found: dict[str, dict[str, Any]] = {}
    for pod in manifests.pods:
        found.setdefault(pod.plan.pod_set, pod.manifest["spec"]["containers"][0])
    return found


def test_a_pod_runs_its_pod_sets_image_and_the_others_the_executors() -> None:
    trainers = replace(gpu_pods(1, gpus=8, name="trainer"), image=PYTORCH)
    plain = gpu_pods(1, gpus=8, name="plain")
    found = containers(
        trainers,
        plain,
        commands={"trainer": ("torchrun", "train.py"), "plain": ("python3", "x.py")},
        image="registry.local/default:1",
    )
    assert found["trainer"]["image"] == PYTORCH
    assert found["trainer"]["command"] == ["torchrun", "train.py"]
    assert found["plain"]["image"] == "registry.local/default:1"


def test_a_pod_set_without_image_or_command_runs_the_default_workload_in_the_default_image() -> (
    None
):
    found = containers(gpu_pods(2, gpus=8))
    assert found["workers"]["image"] == DEFAULT_IMAGE
    assert found["workers"]["command"] == ["python3", "-c", WORKLOAD]


def test_a_pod_set_with_an_image_and_no_command_runs_the_images_entrypoint() -> None:
    found = containers(replace(gpu_pods(2, gpus=8), image=PYTORCH))
    assert found["workers"]["image"] == PYTORCH
    assert "command" not in found["workers"]


def test_a_command_whose_program_is_empty_still_cannot_start() -> None:
    placed = place(gang("img", replace(gpu_pods(1, gpus=8), image=PYTORCH)))
    launch = placed.launch("img", command=("", "x"))
    with pytest.raises(ExecutorStartFailed, match="program is empty"):
        gang_manifests(launch, PodOptions(), WORKLOAD)


def test_only_the_kubernetes_executor_runs_containers() -> None:
    assert KUBERNETES_CAPABILITIES.runs_containers
    assert not LOCAL_CAPABILITIES.runs_containers
