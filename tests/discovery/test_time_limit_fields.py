"""``timeLimit`` in a job file and in a policy's priority classes, and ``starvationGuardS``:
read as durations, written back the same, refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from topoq.discovery.jobfile import workload_from_job_file
from topoq.discovery.kubernetes_workload import workload_from_kueue
from topoq.discovery.policy import policy_document, policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import DEFAULT_STARVATION_GUARD_S


def job_file(**spec: Any) -> dict[str, Any]:
    pods = [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}]
    return {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"podSets": pods, **spec},
    }


def policy_file(**scheduling: Any) -> dict[str, Any]:
    return {
        "apiVersion": "topoq.io/v1",
        "kind": "Policy",
        "scheduling": scheduling,
        "teams": [{"name": "nlp", "quotas": [{"flavor": "p5.48xlarge", "instances": 2}]}],
    }


@pytest.mark.parametrize(("written", "seconds"), [("2h", 7200), (90, 90), ("1-00:00:00", 86400)])
def test_a_job_file_time_limit_is_read_in_seconds(written: object, seconds: float) -> None:
    assert workload_from_job_file(job_file(timeLimit=written), source="j.yaml").time_limit_s == (
        seconds
    )
    snake = workload_from_job_file(job_file(time_limit=written), source="j.yaml")
    assert snake.time_limit_s == seconds


def test_a_job_file_without_a_time_limit_has_none() -> None:
    assert workload_from_job_file(job_file(), source="j.yaml").time_limit_s is None


def test_a_bad_job_file_time_limit_names_the_field() -> None:
    with pytest.raises(InvalidInputError) as refused:
        workload_from_job_file(job_file(timeLimit="forever"), source="j.yaml")
    assert str(refused.value).startswith("j.yaml: spec.timeLimit: expected a duration")


def test_class_time_limits_and_the_guard_are_read_and_written_back_the_same() -> None:
    classes = [{"name": "batch", "weight": 10, "timeLimit": "4h"}, {"name": "serve", "weight": 50}]
    policy = policy_from_document(
        policy_file(priorityClasses=classes, starvationGuardS="15m"), source="p.yaml"
    )
    assert [c.time_limit_s for c in policy.priority_classes] == [14400, None]
    assert policy.starvation_guard_s == 900
    again = policy_from_document(policy_document(policy), source="again")
    assert again == policy


def test_the_guard_defaults_and_zero_turns_it_off() -> None:
    assert policy_from_document(policy_file(), source="p").starvation_guard_s == (
        DEFAULT_STARVATION_GUARD_S
    )
    off = policy_from_document(policy_file(starvation_guard_s=0), source="p")
    assert off.starvation_guard_s == 0


@pytest.mark.parametrize(
    ("scheduling", "where"),
    [
        ({"starvationGuardS": "-1"}, "scheduling.starvationGuardS"),
        ({"priorityClasses": [{"name": "b", "weight": 1, "timeLimit": 0}]}, "timeLimit"),
        ({"priorityClasses": [{"name": "b", "weight": 1, "timeLimit": "x"}]}, "timeLimit"),
    ],
)
def test_a_bad_duration_in_the_policy_names_the_field(
    scheduling: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        policy_from_document(policy_file(**scheduling), source="p.yaml")
    assert where in str(refused.value) and refused.value.hint


def kueue_workload(**spec: Any) -> dict[str, Any]:
    pods = {"name": "w", "count": 1, "template": {"spec": {"containers": [_container()]}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "j", "namespace": "nlp"},
        "spec": {"podSets": [pods], **spec},
    }


def _container() -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"nvidia.com/gpu": 8}}}


def test_a_kueue_workload_s_maximum_execution_time_is_its_time_limit() -> None:
    limited = workload_from_kueue(kueue_workload(maximumExecutionTimeSeconds=3600), source="w")
    assert limited.time_limit_s == 3600
    assert workload_from_kueue(kueue_workload(), source="w").time_limit_s is None


@pytest.mark.parametrize("written", [0, -5, "1h"])
def test_a_bad_kueue_maximum_execution_time_names_the_field(written: object) -> None:
    with pytest.raises(InvalidInputError) as refused:
        workload_from_kueue(kueue_workload(maximumExecutionTimeSeconds=written), source="w.yaml")
    assert "spec.maximumExecutionTimeSeconds" in str(refused.value)
