"""The dependency fields of each job format, read on their own (submission merges them with
the request's and checks the ids against the store: tests/api/test_dependencies.py)."""

from __future__ import annotations

import pytest

from topoq.discovery.job_dependencies import (
    WrittenDependency,
    dependencies_from_hyperpod_job,
    dependencies_from_job_file,
    dependencies_from_kueue,
)
from topoq.discovery.jobfile import workload_from_job_file
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import Dependency, DependencyKind, JobId

OK, ANY, FAILED = DependencyKind.AFTER_OK, DependencyKind.AFTER_ANY, DependencyKind.AFTER_FAILED
JOB_FILE = {
    "apiVersion": "topoq.io/v1",
    "kind": "Job",
    "metadata": {"name": "train"},
    "spec": {
        "podSets": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 1}}],
        "afterOk": ["prep", "tokenize"],
        "after_any": "eval-a, eval-b",
        "afterFailed": [],
    },
}


def written(kind: DependencyKind, job: str, where: str) -> WrittenDependency:
    return WrittenDependency(Dependency(kind, JobId(job)), where)


def test_a_job_file_names_dependencies_in_lists_or_comma_separated_strings() -> None:
    assert dependencies_from_job_file(JOB_FILE, source="train.yaml") == (
        written(OK, "prep", "spec.afterOk[0]"),
        written(OK, "tokenize", "spec.afterOk[1]"),
        written(ANY, "eval-a", "spec.after_any"),
        written(ANY, "eval-b", "spec.after_any"),
    )
    assert workload_from_job_file(JOB_FILE, source="train.yaml").name == "train"  # keys allowed


def test_a_hyperpod_job_names_dependencies_in_its_after_fields() -> None:
    document = {"job_name": "train", "after_failed": "prep", "after_ok": ["a", "b"]}
    assert dependencies_from_hyperpod_job(document, source="job.yaml") == (
        written(OK, "a", "after_ok[0]"),
        written(OK, "b", "after_ok[1]"),
        written(FAILED, "prep", "after_failed"),
    )
    assert dependencies_from_hyperpod_job({"job_name": "x"}, source="job.yaml") == ()


def test_a_kueue_workload_names_dependencies_in_its_own_annotations() -> None:
    annotations = {"topoq.io/after-any": "a,b", "topoq.io/podset-spread-topology": "x"}
    document = {"metadata": {"name": "w", "annotations": annotations}, "spec": {"podSets": []}}
    where = "metadata.annotations.topoq.io/after-any"
    assert dependencies_from_kueue(document, source="w.yaml") == (
        written(ANY, "a", where),
        written(ANY, "b", where),
    )


@pytest.mark.parametrize(
    ("read", "document", "error"),
    [
        (
            dependencies_from_hyperpod_job,
            {"after_sucess": "x"},
            "job.yaml: after_sucess: unknown dependency key 'after_sucess' (did you mean "
            "'after_ok'? allowed dependency keys: after_ok, after_any, after_failed)",
        ),
        (
            dependencies_from_job_file,
            {"spec": {"afterOk": ""}},
            "job.yaml: spec.afterOk: '' has an empty job id",
        ),
        (
            dependencies_from_kueue,
            {"metadata": {"annotations": {"topoq.io/after-ok": "UPPER"}}},
            "job.yaml: metadata.annotations.topoq.io/after-ok: 'UPPER' is not a valid job id",
        ),
    ],
)
def test_malformed_dependency_fields_are_errors_naming_the_file_and_field(
    read: object, document: dict[str, object], error: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        read(document, source="job.yaml")  # type: ignore[operator]
    assert str(raised.value).startswith(error)
