"""Every reader keeps the container image a job file names (HyperPod's ``image``, a topoq pod
set's ``image``, the first container's ``image`` of a Kubernetes pod template), and refuses
one no container runtime could take, naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from topoq.discovery.documents import read_document
from topoq.discovery.hyperpod_job import HYPERPOD_UNUSED_FIELDS, workload_from_hyperpod_job
from topoq.discovery.jobfile import load_workload, workload_from_document, workload_from_job_file
from topoq.domain.errors import InvalidInputError, InvalidRequestError
from topoq.domain.launch import MAX_IMAGE_CHARS
from topoq.domain.workload import PodSetSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ECR = "123456789012.dkr.ecr.us-east-2.amazonaws.com/llama3-train:latest"
BAD_IMAGES = [
    pytest.param("", "the image is empty", id="empty"),
    pytest.param("pytorch/pytorch: 2.3", "whitespace or a control character", id="space"),
    pytest.param("trainer:1\n", "whitespace or a control character", id="newline"),
    pytest.param("trainer\x00:1", "whitespace or a control character", id="nul"),
    pytest.param("a" * (MAX_IMAGE_CHARS + 1), "an image of 4,097 characters", id="long"),
]


@pytest.mark.parametrize(
    ("path", "images"),
    [
        ("workloads/hyperpod-pytorch-job.yaml", {"worker": ECR}),
        (
            "workloads/group-launcher-workers.yaml",
            {"launcher": "launcher:1", "workers": "trainer:1"},
        ),
        ("workloads/llama-70b-job.yaml", dict.fromkeys(("launcher", "workers", "evaluators"))),
        ("kubernetes/jobs/indexed-job.yaml", {"main": "python:3.11-slim"}),
        (
            "kubernetes/training/kubeflow-pytorch-job.yaml",
            {"master": "pytorch/pytorch:latest", "worker": "pytorch/pytorch:latest"},
        ),
        (
            "kubernetes/training/hyperpod-pytorch-job.yaml",
            {"pod": "123456789012.dkr.ecr.us-west-2.amazonaws.com/llama:latest"},
        ),
    ],
)
def test_the_examples_images_are_kept_per_pod_set(path: str, images: dict[str, Any]) -> None:
    workload = load_workload(EXAMPLES / path)
    assert {pod_set.name: pod_set.image for pod_set in workload.pod_sets} == images


def test_a_pod_group_keeps_its_pods_image() -> None:
    workload = load_workload(EXAMPLES / "kubernetes/jobs/pod-group.yaml")
    assert {pod_set.image for pod_set in workload.pod_sets} == {"mpioperator/openmpi:0.5.0"}


def test_hyperpods_image_is_read_not_listed_as_unused() -> None:
    assert "image" not in HYPERPOD_UNUSED_FIELDS
    document = {"job_name": "train", "instance_type": "ml.p5.48xlarge", "image": "img:1"}
    [worker] = workload_from_hyperpod_job(document, source="job.yaml").pod_sets
    assert worker.image == "img:1"
    del document["image"]
    [worker] = workload_from_hyperpod_job(document, source="job.yaml").pod_sets
    assert worker.image is None


def test_an_unknown_hyperpod_field_lists_the_image_with_the_read_fields() -> None:
    document = {"job_name": "train", "instance_type": "ml.p5.48xlarge", "imagee": "img:1"}
    with pytest.raises(InvalidInputError) as raised:
        workload_from_hyperpod_job(document, source="job.yaml")
    hint = raised.value.hint or ""
    assert hint.startswith("did you mean 'image'?")
    assert ", image, " in hint and "others (pull_policy, volume, …)" in hint


def test_a_topoq_pod_set_takes_an_image() -> None:
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {
            "podSets": [
                {"name": "a", "count": 1, "requests": {"cpu": 1}, "image": "pytorch/pytorch:2.3"},
                {"name": "b", "count": 1, "requests": {"cpu": 1}},
            ]
        },
    }
    workload = workload_from_job_file(document, source="job.yaml")
    assert [p.image for p in workload.pod_sets] == ["pytorch/pytorch:2.3", None]


@pytest.mark.parametrize(("image", "message"), BAD_IMAGES)
def test_a_bad_hyperpod_image_is_refused_naming_the_field(image: str, message: str) -> None:
    document = {"job_name": "train", "instance_type": "ml.p5.48xlarge", "image": image}
    with pytest.raises(InvalidRequestError) as raised:
        workload_from_hyperpod_job(document, source="job.yaml")
    assert raised.value.where == "job.yaml: image"
    assert message in raised.value.message
    assert "image reference" in (raised.value.hint or "")


@pytest.mark.parametrize(("image", "message"), BAD_IMAGES)
def test_a_bad_container_image_is_refused_naming_the_container(image: str, message: str) -> None:
    document = copy.deepcopy(read_document(EXAMPLES / "kubernetes/jobs/indexed-job.yaml"))
    document["spec"]["template"]["spec"]["containers"][0]["image"] = image
    with pytest.raises(InvalidRequestError) as raised:
        workload_from_document(document, source="job.yaml")
    assert (raised.value.where or "").endswith("spec.containers[0].image")
    assert message in raised.value.message


def test_an_image_that_is_not_a_string_is_refused() -> None:
    document = {"job_name": "train", "instance_type": "ml.p5.48xlarge", "image": 3}
    with pytest.raises(InvalidInputError, match=r"job.yaml: image: expected a string"):
        workload_from_hyperpod_job(document, source="job.yaml")


@pytest.mark.parametrize(("image", "message"), BAD_IMAGES)
def test_a_pod_set_spec_refuses_a_bad_image(image: str, message: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        PodSetSpec("w", 1, image=image)
    assert raised.value.where == "pod set 'w', image"
    assert message in raised.value.message
