"""What the API reads goes through the file readers, so their rules hold on the wire too:
quantities bounded and whole where resources are counted, names that are strings following
their rule, and a policy over the team limit refused at once — each a 422 naming the field,
with nothing stored."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from tests.api.conftest import Api, small_job

V1 = "/api/v1"


def job_with_requests(requests: dict[str, Any]) -> dict[str, Any]:
    body = small_job("quantity-check")
    body = copy.deepcopy(body)
    body["document"]["spec"]["podSets"][0]["requests"] = requests
    return body


@pytest.mark.parametrize(
    ("requests", "words"),
    [
        ({"nvidia.com/gpu": 0.5}, "no node of the cluster is open to GPU shares"),
        ({"nvidia.com/gpu": 1.5}, "neither whole GPUs nor a share of one GPU"),
        ({"nvidia.com/gpu": 8, "cpu": "9" * 5000}, "longer than 64 characters"),
        ({"nvidia.com/gpu": 8, "memory": "1e999999999"}, "exponent beyond"),
        ({"nvidia.com/gpu": 8, "pods": "1.5"}, "must be a whole number"),
    ],
)
def test_a_bad_quantity_is_a_422_naming_the_field_and_nothing_is_stored(
    api: Api, requests: dict[str, Any], words: str
) -> None:
    response = api.client.post(
        f"{V1}/jobs", json=job_with_requests(requests), headers=api.headers("member")
    )
    assert response.status_code == 422, response.text
    assert words in response.text
    assert "requests" in response.text
    assert api.store.jobs(include_finished=True) == {}


def test_a_gpu_count_of_infinity_is_a_422(api: Api) -> None:
    text = json.dumps(job_with_requests({"nvidia.com/gpu": 8})).replace(": 8}", ": Infinity}")
    assert "Infinity" in text
    response = api.client.post(
        f"{V1}/jobs",
        content=text,
        headers={**api.headers("member"), "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert api.store.jobs(include_finished=True) == {}


def policy_body(teams: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": teams}


@pytest.mark.parametrize(
    ("name", "words"), [(42, "expected a string"), ("Team A", "not a valid team name")]
)
def test_a_policy_whose_team_name_breaks_the_rule_is_a_422_and_no_new_version(
    api: Api, name: object, words: str
) -> None:
    before = api.store.policy_versions()
    team = {"name": name, "quotas": [{"flavor": "ml.p5.48xlarge", "instances": 1}]}
    response = api.client.put(
        f"{V1}/policy", json=policy_body([team]), headers=api.headers("admin")
    )
    assert response.status_code == 422, response.text
    assert words in response.text and "teams[0].name" in response.text
    assert api.store.policy_versions() == before


def test_a_policy_over_the_team_limit_is_refused_at_once(api: Api) -> None:
    teams = [{"name": f"team-{index}"} for index in range(20_000)]
    started = time.thread_time()
    response = api.client.put(f"{V1}/policy", json=policy_body(teams), headers=api.headers("admin"))
    assert time.thread_time() - started < 5  # the body itself is 600 kB of JSON
    assert response.status_code == 422, response.text
    assert "20,000 teams" in response.text and "at most 1,000" in response.text
