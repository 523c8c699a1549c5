"""Job answers on the wire: a pod set's image and the submit answer's warnings go out in
camelCase and read back equal; an answer from a server that knew neither still reads."""

from __future__ import annotations

from dataclasses import replace

from topoq.domain.job import JobView
from topoq.testing.governance import job
from topoq.wire.v1 import JobDetail
from topoq.wire.v1.convert import job_detail

PYTORCH = "pytorch/pytorch:2.3"


def imaged_job() -> JobView:
    view = job("train", "llm", pods=2)
    pod_set = replace(view.spec.workload.pod_sets[0], image=PYTORCH)
    workload = replace(view.spec.workload, pod_sets=(pod_set,))
    return replace(view, spec=replace(view.spec, workload=workload))


def test_a_pod_sets_image_and_the_warnings_round_trip() -> None:
    detail = job_detail(imaged_job()).model_copy(update={"warnings": ["not run"]})
    text = detail.model_dump_json()
    assert '"image":"pytorch/pytorch:2.3"' in text and '"warnings":["not run"]' in text
    read = JobDetail.model_validate_json(text)
    assert read == detail
    assert read.workload.pod_sets[0].image == PYTORCH


def test_a_pod_set_without_an_image_reads_as_null() -> None:
    detail = job_detail(job("plain", "llm", pods=1))
    dumped = detail.model_dump(mode="json")
    assert dumped["workload"]["podSets"][0]["image"] is None and dumped["warnings"] == []


def test_an_answer_without_image_or_warnings_still_reads() -> None:
    dumped = job_detail(imaged_job()).model_dump(mode="json")
    del dumped["warnings"]
    del dumped["workload"]["podSets"][0]["image"]
    read = JobDetail.model_validate(dumped)
    assert read.warnings == [] and read.workload.pod_sets[0].image is None
