"""Time limits over a real ``topoq server`` (SQLite, local executor, pods that sleep 60 s): a
job given ``time_limit_s`` (or ``timeLimit`` in its document, or its priority class's default)
is stopped and fails with TIME_LIMIT_REACHED; a bad limit is a 422 naming the field."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import CLUSTER_FILE, TEAM, small_job
from tests.api.test_server import client, wait_for
from topoq.testing.server import running_server

POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: time-limits}
scheduling:
  priorityClasses:
  - {name: short, weight: 10, timeLimit: 2s}
  - {name: long, weight: 10}
  defaultPriorityClass: long
  starvationGuardS: 10m
teams:
- name: nlp
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 4}
"""


def server_with_policy(
    tmp_path_factory: pytest.TempPathFactory, name: str, policy_text: str
) -> Iterator[httpx.Client]:
    """An admin client of a real server on the API tests' cluster with ``policy_text``, its
    pods sleeping 60 s."""
    data_dir = tmp_path_factory.mktemp("server")
    policy = data_dir.with_name(f"{name}-policy.yaml")
    policy.write_text(policy_text)
    environment = os.environ | {"TOPOQ_SLEEP_S": "60"}
    with running_server(
        data_dir, cluster=CLUSTER_FILE, policy=policy, environment=environment
    ) as running:
        yield client(running.url, (data_dir / "admin-token").read_text().strip())


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "time-limits", POLICY)


def ended(admin: httpx.Client, job: str) -> dict[str, Any]:
    done: dict[str, Any] = wait_for(
        lambda: admin.get(f"/jobs/{job}").json(),
        lambda j: j["phase"] in ("failed", "succeeded", "cancelled"),
        timeout_s=30,
    )
    return done


def with_spec(name: str, **spec: object) -> dict[str, Any]:
    body: dict[str, Any] = small_job(name, pods=1, team=TEAM)
    body["document"]["spec"].update(spec)
    return body


@pytest.mark.parametrize(
    "body",
    [
        {**small_job("by-request", pods=1, team=TEAM), "time_limit_s": 2},
        with_spec("by-document", timeLimit="2s"),
        {**small_job("by-class", pods=1, team=TEAM), "priority_class": "short"},
    ],
    ids=["request", "document", "class"],
)
def test_a_job_running_past_its_limit_is_stopped_with_time_limit_reached(
    admin: httpx.Client, body: dict[str, Any]
) -> None:
    submitted = admin.post("/jobs", json=body)
    assert submitted.status_code == 201, submitted.text
    name = submitted.json()["id"]
    job = ended(admin, name)
    assert job["phase"] == "failed", job
    assert job["history"][-1]["cause"].startswith("TIME_LIMIT_REACHED"), job["history"]
    assert [c["phase"] for c in job["history"]] == ["pending", "admitted", "running", "failed"]
    ran = job["history"][-1]["at"] - job["history"][-2]["at"]
    assert 2 <= ran < 15, "stopped at its limit, long before its pods' 60 s sleep ended"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**small_job("zero", pods=1, team=TEAM), "time_limit_s": 0}, "time_limit_s"),
        (with_spec("soon", timeLimit="soon"), "document.spec.timeLimit"),
    ],
)
def test_a_bad_time_limit_is_a_422_naming_the_field(
    admin: httpx.Client, body: dict[str, Any], where: str
) -> None:
    response = admin.post("/jobs", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert where in str(detail), detail


def test_a_waiting_job_gets_an_eta_from_the_running_time_limits(admin: httpx.Client) -> None:
    """nlp may use 6 of the 8 nodes (4 guaranteed, 2 borrowed); three 2-node jobs limited
    to 40 s use them, so a fourth waits for quota until the first of them ends: its ETA,
    over the API (explain and the job itself)."""
    fillers = [f"fill-{i}" for i in range(3)]
    for name in fillers:
        body = {**small_job(name, pods=2, team=TEAM), "time_limit_s": 40}
        assert admin.post("/jobs", json=body).status_code == 201
    for name in fillers:
        wait_for(lambda n=name: admin.get(f"/jobs/{n}").json(), lambda j: j["phase"] == "running")
    assert admin.post("/jobs", json=small_job("after", pods=2, team=TEAM)).status_code == 201
    explained = wait_for(
        lambda: admin.get("/jobs/after/explain").json(), lambda e: e.get("etaAt") is not None
    )
    starts = []
    for name in fillers:
        history = admin.get(f"/jobs/{name}").json()["history"]
        starts.append(next(c["at"] for c in history if c["phase"] == "running"))
    assert explained["etaAt"] == pytest.approx(min(starts) + 40, abs=1.5), explained
    assert explained["numbers"]["eta_at"] == explained["etaAt"]
    # the job itself shows the ETA of the controller's cycle (explain may answer before it)
    got = wait_for(lambda: admin.get("/jobs/after").json(), lambda j: j.get("etaAt") is not None)
    assert got["etaAt"] == pytest.approx(explained["etaAt"], abs=1.5)
    for name in [*fillers, "after"]:
        admin.post(f"/jobs/{name}/cancel")
