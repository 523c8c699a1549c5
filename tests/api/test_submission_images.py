"""A pod set's image at submission: kept on the job (``GET /jobs/{id}`` shows it); accepted with
a warning in the submit answer when the server's executor runs no containers; refused (422
naming the field) when no container runtime could take it. tests/api/test_server.py does the
same over a real server process with the local executor."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.api.conftest import Api, small_job
from tests.api.test_submission_fields import POD_SET, assert_refused, submit, with_pod_set
from topoq.executors.kubernetes.plugin import KUBERNETES_CAPABILITIES
from topoq.executors.local import LOCAL_CAPABILITIES

V1 = "/api/v1"
PYTORCH = "pytorch/pytorch:2.3"


def two_pod_sets() -> dict[str, Any]:
    """A topoq job whose first pod set names an image and whose second does not."""
    body = copy.deepcopy(small_job("imaged", pods=1))
    pod_sets = body["document"]["spec"]["podSets"]
    pod_sets[0] |= {"name": "worker", "image": PYTORCH}
    pod_sets.append(pod_sets[0] | {"name": "helper"})
    del pod_sets[1]["image"]
    return body


def test_the_local_executor_accepts_an_image_with_a_warning_naming_the_pod_set(api: Api) -> None:
    api.service.executor = LOCAL_CAPABILITIES
    response = submit(api, two_pod_sets())
    assert response.status_code == 201, response.text
    assert response.json()["warnings"] == [
        f"pod set 'worker' names image {PYTORCH!r} that is not run: the local executor runs "
        "each pod's command as a process on its host, not in a container (start the server "
        "with --executor kubernetes to run images)"
    ]
    described = api.client.get(f"{V1}/jobs/imaged", headers=api.headers("admin")).json()
    assert [(p["name"], p["image"]) for p in described["workload"]["podSets"]] == [
        ("worker", PYTORCH),
        ("helper", None),
    ]
    assert described["warnings"] == []
    [entry] = [e for e in api.store.audit_log() if e.target == "imaged"]
    assert entry.detail["warnings"] == response.json()["warnings"]


@pytest.mark.parametrize("executor", [KUBERNETES_CAPABILITIES, None], ids=["kubernetes", "unknown"])
def test_an_executor_that_runs_containers_or_is_unknown_warns_of_nothing(
    api: Api, executor: Any
) -> None:
    api.service.executor = executor
    response = submit(api, two_pod_sets())
    assert response.status_code == 201, response.text
    assert response.json()["warnings"] == []
    assert response.json()["workload"]["podSets"][0]["image"] == PYTORCH
    [entry] = [e for e in api.store.audit_log() if e.target == "imaged"]
    assert "warnings" not in entry.detail


def test_a_job_without_an_image_gets_no_warning_from_the_local_executor(api: Api) -> None:
    api.service.executor = LOCAL_CAPABILITIES
    response = submit(api, small_job("plain"))
    assert response.status_code == 201, response.text
    assert response.json()["warnings"] == []


@pytest.mark.parametrize("image", ["", "pytorch/pytorch 2.3", "a\tb", "x" * 4097])
def test_an_image_no_runtime_could_take_is_refused_naming_the_field(api: Api, image: str) -> None:
    detail = assert_refused(api, with_pod_set(image=image), f"{POD_SET}.image")
    assert "image" in detail["message"]
