"""The main flow over a real server process: SQLite store, local executor (real pod processes),
the controller loop, uvicorn. Started as `python -m topoq.bootstrap` on a free port."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.api.conftest import (
    CLUSTER_FILE,
    EXAMPLES,
    POLICY_FILE,
    TEAM,
    fitted_example,
    small_job,
    waits_forever,
)
from topoq.testing.server import running_server

POD_SLEEP_S = "2"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("server")
    environment = os.environ | {"TOPOQ_SLEEP_S": POD_SLEEP_S}
    with running_server(
        data_dir, cluster=CLUSTER_FILE, policy=POLICY_FILE, environment=environment
    ) as running:
        yield running.url, data_dir


def client(url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=10)


@pytest.fixture(scope="module")
def admin(server: tuple[str, Path]) -> httpx.Client:
    url, data_dir = server
    token_file = data_dir / "admin-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    return client(url, token_file.read_text().strip())


@pytest.fixture(scope="module")
def member(server: tuple[str, Path], admin: httpx.Client) -> httpx.Client:
    made = admin.post("/tokens", json={"name": "alice", "role": "member", "teams": [TEAM]})
    assert made.status_code == 201, made.text
    return client(server[0], made.json()["token"])


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def example(name: str) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_health_needs_no_token_and_the_api_does(server: tuple[str, Path]) -> None:
    url, _ = server
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
    assert client(url, None).get("/jobs").status_code == 401
    assert client(url, "forged").get("/jobs").status_code == 401


def test_a_job_is_admitted_runs_real_pods_and_succeeds(member: httpx.Client) -> None:
    submitted = member.post("/jobs", json=small_job("quick"))
    assert submitted.status_code == 201, submitted.text
    job = wait_for(lambda: member.get("/jobs/quick").json(), lambda j: j["phase"] == "running")
    assert job["phase"] == "running" and len(job["allocation"]["nodes"]) == 2
    logs = member.get("/jobs/quick/logs", params={"pod": 1}).json()["text"]
    assert "rank 1 of world size 2" in logs
    done = wait_for(lambda: member.get("/jobs/quick").json(), lambda j: j["phase"] == "succeeded")
    assert done["phase"] == "succeeded"
    phases = [change["phase"] for change in member.get("/jobs/quick/history").json()["history"]]
    assert phases == ["pending", "admitted", "running", "succeeded"]


@pytest.mark.parametrize(
    ("job_format", "file", "job_id"),
    [
        ("topoq", "llama-70b-job.yaml", "llama-70b"),
        ("hyperpod", "hyperpod-pytorch-job.yaml", "llama3-finetune"),
        ("kueue", "required-block.yaml", "gpt-block-8"),
    ],
)
def test_each_format_is_accepted_and_explained(
    member: httpx.Client, job_format: str, file: str, job_id: str
) -> None:
    document = fitted_example(job_format, example(file))
    response = member.post("/jobs", json={"format": job_format, "document": document})
    assert response.status_code == 201, response.text
    explained = wait_for(
        lambda: member.get(f"/jobs/{job_id}/explain").json(), lambda e: e["reason"] is not None
    )
    assert explained["phase"] == "pending" and explained["message"], explained
    no_logs = member.get(f"/jobs/{job_id}/logs")
    assert no_logs.status_code == 404 and "never started" in no_logs.json()["detail"]["message"]
    again = member.post("/jobs", json={"format": job_format, "document": document})
    assert again.status_code == 409
    cancelled = member.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["phase"] == "cancelled"


def test_a_hyperpod_jobs_image_is_accepted_with_a_warning_by_the_local_executor(
    admin: httpx.Client, member: httpx.Client
) -> None:
    document = fitted_example("hyperpod", example("hyperpod-pytorch-job.yaml"))
    image = document["image"]
    document |= {"job_name": "imaged"}
    response = member.post("/jobs", json={"format": "hyperpod", "document": document})
    assert response.status_code == 201, response.text
    assert response.json()["warnings"] == [
        f"pod set 'worker' names image {image!r} that is not run: the local executor runs "
        "each pod's command as a process on its host, not in a container (start the server "
        "with --executor kubernetes to run images)"
    ]
    described = member.get("/jobs/imaged").json()
    assert described["workload"]["podSets"][0]["image"] == image
    assert described["warnings"] == []
    [entry] = [e for e in admin.get("/audit").json() if e["target"] == "imaged"]
    assert entry["detail"]["warnings"] == response.json()["warnings"]
    plain = member.post("/jobs", json=small_job("no-image")).json()
    assert plain["warnings"] == [] and plain["workload"]["podSets"][0]["image"] is None
    for job_id in ("imaged", "no-image"):
        assert member.post(f"/jobs/{job_id}/cancel").status_code == 200


@pytest.mark.parametrize(
    ("job_format", "file", "key", "value", "where"),
    [
        ("topoq", "llama-70b-job.yaml", "spec", {"podSets": "x"}, "document.spec.podSets"),
        ("hyperpod", "hyperpod-pytorch-job.yaml", "job_name", "Not_A_Label", "document.job_name"),
        ("kueue", "required-block.yaml", "apiVersion", "kueue.x-k8s.io/v9", "document.apiVersion"),
    ],
)
def test_bad_documents_are_422_over_the_wire(
    member: httpx.Client, job_format: str, file: str, key: str, value: object, where: str
) -> None:
    document = example(file) | {key: value}
    response = member.post("/jobs", json={"format": job_format, "document": document})
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["where"].startswith(where)


def test_hold_release_list_and_other_teams(
    server: tuple[str, Path], admin: httpx.Client, member: httpx.Client
) -> None:
    wide = waits_forever("wide")
    assert member.post("/jobs", json=wide).status_code == 201
    assert member.post("/jobs/wide/hold").json()["held"] is True
    held = wait_for(
        lambda: member.get("/jobs/wide/explain").json(), lambda e: e["reason"] == "HELD"
    )
    assert held["reason"] == "HELD"
    assert member.post("/jobs/wide/release").json()["held"] is False
    theirs = small_job("theirs", team="vision")
    assert admin.post("/jobs", json=theirs).status_code == 201
    rows = {row["id"]: row for row in member.get("/jobs").json()["items"]}
    assert rows["wide"]["visible"] and not rows["theirs"]["visible"]
    assert member.post("/jobs/theirs/cancel").status_code == 403
    made = admin.post("/tokens", json={"name": "val", "role": "viewer", "teams": [TEAM]})
    viewer = client(server[0], made.json()["token"])
    assert viewer.get("/jobs/wide").status_code == 200
    refused = viewer.post("/jobs/wide/cancel")
    assert refused.status_code == 403 and "viewer" in refused.json()["detail"]["message"]


def test_policy_versions_are_kept(admin: httpx.Client, member: httpx.Client) -> None:
    document = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    document["teams"][1]["fairShareWeight"] = 5
    assert member.put("/policy", json=document).status_code == 403
    put = admin.put("/policy", json=document)
    assert put.status_code == 200, put.text
    versions = admin.get("/policy/versions").json()
    assert [v["actor"] for v in versions][-1] == "admin" and len(versions) == 2
    assert member.get("/policy").json()["document"]["teams"][1]["fairShareWeight"] == 5


def test_a_failed_node_sends_its_gang_elsewhere(admin: httpx.Client) -> None:
    assert admin.post("/nodes/p5-0003/cordon").json()["node"]["cordoned"] is True
    assert admin.post("/nodes/p5-0003/uncordon").json()["node"]["cordoned"] is False
    body = small_job("moving", pods=1)
    assert admin.post("/jobs", json=body).status_code == 201
    job = wait_for(lambda: admin.get("/jobs/moving").json(), lambda j: j["phase"] == "running")
    [node] = job["allocation"]["nodes"]
    assert admin.post(f"/nodes/{node}/fail").json()["node"]["ready"] is False
    moved = wait_for(
        lambda: admin.get("/jobs/moving").json(),
        lambda j: j["allocation"] is not None and node not in j["allocation"]["nodes"],
    )
    assert moved["allocation"] is not None and node not in moved["allocation"]["nodes"]
    assert admin.post(f"/nodes/{node}/recover").json()["node"]["ready"] is True
    topology = admin.get("/topology").json()
    assert topology["gpus"] == 64
    actions = [entry["action"] for entry in admin.get("/audit").json()]
    assert "node" in actions and "submit" in actions


def test_prometheus_metrics_are_served_without_a_token(
    server: tuple[str, Path], member: httpx.Client
) -> None:
    url, _ = server
    wait_for(
        lambda: httpx.get(f"{url}/metrics", timeout=5).text,
        lambda text: "topoq_cycle_duration_seconds_count" in text,
    )
    body = httpx.get(f"{url}/metrics", timeout=5).text
    assert "topoq_quota_gpus" in body and 'kind="guarantee"' in body


def test_the_audit_log_names_each_token_and_cannot_be_spoofed(
    server: tuple[str, Path], admin: httpx.Client
) -> None:
    made = admin.post("/tokens", json={"name": "lead", "role": "team-admin", "teams": [TEAM]})
    lead = client(server[0], made.json()["token"])
    for spoof in ("admin", "topoq", "system", "admin-7"):
        refused = lead.post("/tokens", json={"name": spoof, "role": "member", "teams": [TEAM]})
        assert refused.status_code == 422 and refused.json()["detail"]["where"] == "body.name"
    again = lead.post("/tokens", json={"name": "lead", "role": "member", "teams": [TEAM]})
    assert again.status_code == 409, again.text
    worker = lead.post("/tokens", json={"name": "dana", "role": "member", "teams": [TEAM]})
    dana = client(server[0], worker.json()["token"])
    assert dana.post("/jobs", json=waits_forever("audited")).status_code == 201
    assert dana.post("/jobs/audited/hold").status_code == 200
    assert dana.post("/jobs/audited/cancel").status_code == 200
    entries = [e for e in admin.get("/audit").json() if e["target"] in ("audited", "dana")]
    assert [(e["actor"], e["action"]) for e in entries] == [
        ("dana", "cancel"), ("dana", "hold"), ("dana", "submit"), ("lead", "token"),
    ]  # fmt: skip
    names = {t["name"] for t in admin.get("/tokens", params={"include_revoked": True}).json()}
    assert "topoq" not in names and "system" not in names
    assert admin.get("/jobs/audited").json()["user"] == "dana"
