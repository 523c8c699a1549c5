"""Every field of a submission that becomes a name, a path, a process or an environment is
checked at intake (422 naming the field, nothing stored): job and dependency ids and the team
follow one grammar (DNS-1123), pod-set names are DNS labels, environment variables are POSIX
names with bounded values, commands are bounded; and a job no node could hold is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.api.conftest import Api, small_job
from tests.api.test_jobs import FILES, example
from topoq.domain.job import JobId
from topoq.domain.launch import MAX_ARGUMENT_CHARS, MAX_ARGUMENTS, MAX_VARIABLE_CHARS

V1 = "/api/v1"
POD_SET = "document.spec.podSets[0]"


def submit(api: Api, body: dict[str, Any], who: str = "admin") -> Any:
    return api.client.post(f"{V1}/jobs", json=body, headers=api.headers(who))


def with_pod_set(**fields: object) -> dict[str, Any]:
    body = copy.deepcopy(small_job("fine"))
    body["document"]["spec"]["podSets"][0].update(fields)
    return body


def assert_refused(api: Api, body: dict[str, Any], where: str) -> dict[str, str]:
    response = submit(api, body)
    assert response.status_code == 422, response.text
    detail: dict[str, str] = response.json()["detail"]
    assert detail["where"] == where, detail
    assert detail["message"] and detail["hint"], detail
    assert api.store.count_jobs() == 0
    return detail


BAD_IDS = [
    "../../etc/passwd",
    "slash/inside",
    "..",
    "Upper-Case",
    "under_score",
    "with space",
    "-leading-dash",
    "trailing.",
    "a" * 254,
    "colon:inside",
]


@pytest.mark.parametrize("job_id", BAD_IDS)
def test_a_job_id_outside_the_grammar_is_refused(api: Api, job_id: str) -> None:
    detail = assert_refused(api, {**small_job("fine"), "id": job_id}, "id")
    assert "DNS-1123" in detail["hint"]


@pytest.mark.parametrize("job_id", BAD_IDS)
def test_a_document_name_outside_the_grammar_is_refused(api: Api, job_id: str) -> None:
    assert_refused(api, small_job(job_id), "document.metadata.name")


@pytest.mark.parametrize(
    ("field", "document", "where"),
    [
        ("hyperpod", {"job_name": "Bad_Name"}, "document.job_name"),
        ("kueue", {"metadata": {"name": "bad/name"}}, "document.metadata.name"),
    ],
)
def test_each_format_names_its_own_name_field(
    api: Api, field: str, document: dict[str, Any], where: str
) -> None:
    body = {"format": field, "document": example(FILES[field])}
    for key, value in document.items():
        if isinstance(value, dict):
            body["document"][key].update(value)
        else:
            body["document"][key] = value
    assert_refused(api, body, where)


def test_the_longest_valid_id_is_accepted_and_managed(api: Api) -> None:
    long_id = ".".join(["a" * 63] * 4)[:253]
    response = submit(api, {**small_job("fine"), "id": long_id})
    assert response.status_code == 201, response.text
    cancel = api.client.post(f"{V1}/jobs/{long_id}/cancel", headers=api.headers("admin"))
    assert cancel.status_code == 200 and api.store.job(JobId(long_id)).phase == "cancelled"


def test_a_dependency_id_outside_the_grammar_is_refused(api: Api) -> None:
    body = {**small_job("fine"), "dependencies": [{"kind": "after-ok", "job": "../x"}]}
    assert_refused(api, body, "dependencies[0].job")


@pytest.mark.parametrize("team", ["NLP", "nlp_team", "a" * 64, "x/y"])
def test_a_team_outside_the_grammar_is_refused(api: Api, team: str) -> None:
    detail = assert_refused(api, {**small_job("fine"), "team": team}, "team")
    assert "DNS-1123 label" in detail["hint"]


@pytest.mark.parametrize("value", [123, True, ["nlp"], {"name": "nlp"}])
def test_a_name_that_is_not_a_string_is_refused(api: Api, value: object) -> None:
    for field in ("team", "id", "priorityClass"):
        response = submit(api, {**small_job("fine"), field: value})
        assert response.status_code == 422, (field, value, response.text)
        assert response.json()["detail"]["where"] == f"body.{field}"


@pytest.mark.parametrize("name", ["Workers", "work_ers", "a" * 64, "-w"])
def test_a_pod_set_name_outside_the_grammar_is_refused(api: Api, name: str) -> None:
    assert_refused(api, with_pod_set(name=name), f"{POD_SET}.name")


@pytest.mark.parametrize("name", ["A=B", "1ABC", "", "WITH SPACE", "DASH-ED", "é"])
def test_an_environment_name_that_is_not_posix_is_refused(api: Api, name: str) -> None:
    detail = assert_refused(api, with_pod_set(environment={name: "x"}), f"{POD_SET}.environment")
    assert "[A-Za-z_][A-Za-z0-9_]*" in detail["hint"]


def test_an_environment_value_too_long_is_refused(api: Api) -> None:
    body = with_pod_set(environment={"OK": "v" * (MAX_VARIABLE_CHARS + 1)})
    assert_refused(api, body, f"{POD_SET}.environment.OK")


def test_too_many_arguments_or_one_too_long_are_refused(api: Api) -> None:
    assert_refused(api, with_pod_set(command=["x"] * (MAX_ARGUMENTS + 1)), f"{POD_SET}.command")
    long = with_pod_set(command=["python", "x" * (MAX_ARGUMENT_CHARS + 1)])
    assert_refused(api, long, f"{POD_SET}.command[1]")


def test_an_empty_command_word_is_refused(api: Api) -> None:
    assert_refused(api, with_pod_set(command=[""]), f"{POD_SET}.command[0]")


def test_a_valid_environment_and_command_are_kept(api: Api) -> None:
    body = with_pod_set(environment={"_X1": "a=b", "PATH_2": ""}, command=["python", "-c", "1"])
    assert submit(api, body).status_code == 201


def test_more_gpus_per_pod_than_any_node_has_is_refused_naming_the_largest(api: Api) -> None:
    detail = assert_refused(
        api, with_pod_set(requests={"nvidia.com/gpu": 9}), f"{POD_SET}.requests"
    )
    assert "9" in detail["message"] and "8" in detail["hint"]


def test_a_resource_no_node_has_is_refused(api: Api) -> None:
    body = with_pod_set(requests={"nvidia.com/gpu": 8, "example.com/fpga": 1})
    detail = assert_refused(api, body, f"{POD_SET}.requests")
    assert "example.com/fpga" in detail["message"]


def test_more_memory_than_any_node_has_is_refused(api: Api) -> None:
    body = with_pod_set(requests={"nvidia.com/gpu": 8, "memory": "100Ti"})
    assert "memory" in assert_refused(api, body, f"{POD_SET}.requests")["message"]


@pytest.mark.parametrize("requests", [{}, {"nvidia.com/gpu": 0}, {"cpu": "0", "memory": "0"}])
def test_a_pod_set_that_requests_nothing_is_refused(api: Api, requests: dict[str, Any]) -> None:
    assert_refused(api, with_pod_set(requests=requests), f"{POD_SET}.requests")


@pytest.mark.parametrize("value", [101, -1, 10**20, 1e30, 2.5, True, "3", None])
def test_a_max_retry_out_of_range_or_not_whole_is_refused(api: Api, value: object) -> None:
    if value is None:
        return  # null is the default, and allowed
    response = submit(api, {**small_job("fine"), "maxRetry": value})
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["where"] == "body.maxRetry"


@pytest.mark.parametrize("value", [101, 10**20, 1e30, 2.5, True, "3", -1])
def test_a_hyperpod_max_retry_out_of_range_or_not_whole_is_refused(api: Api, value: object) -> None:
    document = example(FILES["hyperpod"]) | {"max_retry": value}
    detail = assert_refused(api, {"format": "hyperpod", "document": document}, "document.max_retry")
    assert "100" in detail["hint"]


@pytest.mark.parametrize("quantity", ["9" * 5_000, "Infinity", "1e999999999", "NaN", "-1"])
def test_a_quantity_that_is_not_a_count_is_a_422(api: Api, quantity: str) -> None:
    response = submit(api, with_pod_set(requests={"nvidia.com/gpu": 8, "cpu": quantity}))
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["where"].startswith("document")
    assert api.store.count_jobs() == 0
