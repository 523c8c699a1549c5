"""batch/v1 Jobs read as the gang they describe: one pod set of ``parallelism`` pods with the
template's requests, Kueue topology annotations, queue and priority labels, and time limit."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from topoq.cli.server_commands import detect_format
from topoq.discovery.batch_jobs import workload_from_kubernetes_object
from topoq.discovery.jobfile import load_workload, workload_from_document
from topoq.domain.errors import InvalidInputError
from topoq.wire.v1 import JobFormat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "jobs"
LAYER_3 = "topology.k8s.aws/network-node-layer-3"


def job() -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLE / "indexed-job.yaml").read_text())
    assert isinstance(document, dict)
    return document


def test_an_indexed_job_is_one_pod_set_of_parallelism_pods() -> None:
    workload = load_workload(EXAMPLE / "indexed-job.yaml")
    assert (workload.name, workload.namespace) == ("bert-indexed", "hyperpod-ns-nlp")
    assert workload.queue == "hyperpod-ns-nlp-localqueue"
    assert workload.priority_class == "training-priority"
    assert workload.time_limit_s == 7200
    [pods] = workload.pod_sets
    assert (pods.name, pods.count) == ("main", 4)
    assert pods.requests.amount("nvidia.com/gpu") == 8
    assert pods.requests.amount("memory") == 256 * 2**30
    assert pods.topology.required == LAYER_3
    assert pods.command[0] == "python3"


def test_a_non_indexed_job_without_completions_is_parallelism_pods() -> None:
    document = job()
    del document["spec"]["completionMode"], document["spec"]["completions"]
    document["spec"]["parallelism"] = 2
    del document["spec"]["activeDeadlineSeconds"]
    workload = workload_from_document(document, source="job.yaml")
    assert workload.pod_sets[0].count == 2 and workload.time_limit_s is None


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        ({"completions": 8}, "spec.completions", "differs from parallelism"),
        ({"parallelism": 0}, "spec.parallelism", "runs no pod"),
        ({"completionMode": "Sometimes"}, "spec.completionMode", "Indexed or NonIndexed"),
        ({"template": None}, "spec.template", "is missing"),
    ],
)
def test_a_job_topoq_cannot_run_as_one_gang_is_refused_naming_the_field(
    change: dict[str, Any], where: str, words: str
) -> None:
    document = job()
    document["spec"] |= change
    with pytest.raises(InvalidInputError) as caught:
        workload_from_document(copy.deepcopy(document), source="job.yaml")
    said = f"{caught.value.where} {caught.value.message} {caught.value.hint}"
    assert f"job.yaml: {where}" in said and words in said, said


def test_an_object_of_another_kind_is_refused_naming_the_kinds_read() -> None:
    with pytest.raises(InvalidInputError) as caught:
        workload_from_kubernetes_object({"apiVersion": "apps/v1", "kind": "Deployment"}, source="d")
    assert "Deployment" in caught.value.message and "batch/v1 Job" in (caught.value.hint or "")


@pytest.mark.parametrize(
    "file",
    [
        "jobs/indexed-job.yaml",
        "training/hyperpod-pytorch-job.yaml",
        "training/kubeflow-pytorch-job.yaml",
    ],
)
def test_topoq_submit_tells_a_kubernetes_manifest_by_its_kind(file: str) -> None:
    document = yaml.safe_load((EXAMPLE.parent / file).read_text())
    assert detect_format(document, file) is JobFormat.KUBERNETES
