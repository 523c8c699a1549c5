"""The server log of a real ``topoq server`` (issue 11): with ``--log-format json
--access-log`` every line of its stderr is a JSON object, there is one record per admission,
preemption, requeue, job end, node action, policy change and API error, one access-log line
per request, and nothing about the API processes' warm-up requests. In the default text
format every line is one readable event."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.api.conftest import CLUSTER_FILE, POLICY_FILE, small_job
from tests.api.test_preemption_server import POLICY
from tests.api.test_server import client, wait_for
from topoq.server.api_process import WARM_UP_REQUESTS
from topoq.testing.server import RunningServer, running_server

ENVIRONMENT = os.environ | {"TOPOQ_SLEEP_S": "120"}
"""Pods run until stopped (the default pod exits 143 on SIGTERM)."""


def job_running(name: str, team: str, program: str | None = None, **fields: Any) -> dict[str, Any]:
    body = small_job(name, pods=2, team=team) | fields
    if program is not None:
        pod_set = body["document"]["spec"]["podSets"][0]  # type: ignore[index]  # small_job's shape
        pod_set["command"] = [sys.executable, "-c", program]
    return body


def records(server: RunningServer) -> list[dict[str, Any]]:
    """Every line of the log, each parsed as JSON (a line that is not fails the test)."""
    return [json.loads(line) for line in server.log_lines()]


def wait_for_record(
    server: RunningServer, found: Callable[[dict[str, Any]], bool], timeout_s: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        matching = [record for record in records(server) if found(record)]
        if matching:
            return matching[0]
        assert time.monotonic() < deadline, "\n".join(server.log_lines())
        time.sleep(0.2)


def phase(admin: httpx.Client, job: str) -> str:
    return str(admin.get(f"/jobs/{job}").json()["phase"])


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("server-log")
    policy = data_dir.with_name("server-log-policy.yaml")
    policy.write_text(POLICY, encoding="utf-8")
    with running_server(
        data_dir,
        "--log-format", "json", "--access-log",
        cluster=CLUSTER_FILE,
        policy=policy,
        environment=ENVIRONMENT,
        through_cli=True,
        separate_stderr=True,
    ) as running:  # fmt: skip
        yield running


def admin_of(server: RunningServer) -> httpx.Client:
    return client(server.url, (server.data_dir / "admin-token").read_text().strip())


def test_the_json_log_tells_what_happened_and_nothing_of_the_warm_up(
    json_server: RunningServer,
) -> None:
    admin = admin_of(json_server)
    vision = [f"vision-{n}" for n in range(4)]  # 8 nodes: 4 in guarantee, 4 borrowed from nlp
    for name in vision:
        assert admin.post("/jobs", json=job_running(name, "vision")).status_code == 201
    for name in vision:
        assert wait_for(lambda n=name: phase(admin, n), lambda p: p == "running") == "running"
    failing = job_running("nlp-train", "nlp", "import sys; sys.exit(3)", maxRetry=1)
    assert admin.post("/jobs", json=failing).status_code == 201
    preempted = wait_for_record(json_server, lambda r: r["event"] == "preempted")
    assert preempted["preemptor"] == "nlp-train" and preempted["preemptor_team"] == "nlp"
    assert preempted["victim"] in vision and preempted["victim_team"] == "vision"
    assert preempted["reason"] == "PREEMPTED_FOR_RECLAIM" and preempted["cause"]
    victim = preempted["victim"]
    wait_for_record(
        json_server, lambda r: r["event"] == "job_ended" and r.get("job") == "nlp-train", 30
    )  # it exits 3, is requeued once (maxRetry 1), exits 3 again and fails

    nodes = admin.get("/nodes").json()
    cordoned = nodes[0]["name"]
    assert admin.post(f"/nodes/{cordoned}/cordon").status_code == 200
    document = yaml.safe_load(POLICY)
    document["scheduling"]["preemption"]["gracePeriodS"] = 3  # 20 before
    assert admin.put("/policy", json=document).status_code == 200
    refused = admin.post("/jobs", json={"format": "topoq", "document": {"kind": "Job"}})
    assert refused.status_code == 422
    assert httpx.get(f"{json_server.url}/api/v1/jobs").status_code == 401  # no token
    wait_for_record(json_server, lambda r: r["event"] == "policy_changed" and r["version"] == 2)
    wait_for_record(  # an access line is written once its answer was sent
        json_server, lambda r: r["event"] == "request" and r["status"] == 401
    )

    log = records(json_server)  # every line is JSON
    for record in log:
        assert list(record)[:5] == ["time", "level", "logger", "event", "message"], record
    [started] = [r for r in log if r["event"] == "server_started"]
    assert started["url"] == f"{json_server.url}/api/v1" and started["executor"] == "local"
    assert started["store"] == "sqlite" and started["data_dir"] == str(json_server.data_dir)
    admitted = {r["job"]: r for r in log if r["event"] == "admitted"}
    assert set(vision) | {"nlp-train"} <= set(admitted)
    first = admitted["vision-0"]
    assert first["team"] == "vision" and first["gpus"] == 16 and first["nodes"] == 2
    assert first["span"] == {
        "network-node-layer-1": 1, "network-node-layer-2": 1, "network-node-layer-3": 1,
        "hostname": 2,
    }  # fmt: skip
    assert isinstance(first["priority"], int)
    requeues = [r for r in log if r["event"] == "requeued"]
    assert {"job": victim, "cause": "requeued after preemption: its pods stopped"}.items() <= (
        next(r for r in requeues if r["job"] == victim).items()
    )
    retried = next(r for r in requeues if r["job"] == "nlp-train")
    assert "a pod exited 3" in retried["cause"]
    [ended] = [r for r in log if r["event"] == "job_ended" and r["job"] == "nlp-train"]
    assert ended["outcome"] == "failed" and ended["exit_code"] == 3 and ended["level"] == "WARNING"
    [cordon] = [r for r in log if r["event"] == "node_cordoned"]
    assert cordon["node"] == cordoned and cordon["actor"] == "admin"
    [policy] = [r for r in log if r["event"] == "policy_changed" and r["version"] == 2]
    assert policy["actor"] == "admin"
    assert any(r["event"] == "policy_changed" and r["version"] == 1 for r in log)  # the file
    errors = [r for r in log if r["event"] == "api_error"]
    invalid = next(r for r in errors if r["status"] == 422)
    assert invalid["path"] == "/api/v1/jobs" and invalid["code"] == "invalid_request"
    assert invalid["method"] == "POST" and invalid["level"] == "INFO" and invalid["message"]
    assert any(r["status"] == 401 and r["path"] == "/api/v1/jobs" for r in errors)

    requests = [r for r in log if r["event"] == "request"]
    token = (json_server.data_dir / "admin-token").read_text().strip()
    assert all(token not in json.dumps(r) for r in log)
    seen = {(r["method"], r["path"], r["status"], r["principal"]) for r in requests}
    assert ("POST", "/api/v1/jobs", 201, "admin") in seen
    assert ("POST", f"/api/v1/nodes/{cordoned}/cordon", 200, "admin") in seen
    assert ("PUT", "/api/v1/policy", 200, "admin") in seen
    assert ("POST", "/api/v1/jobs", 422, "admin") in seen
    assert ("GET", "/api/v1/jobs", 401, "-") in seen
    assert all(isinstance(r["duration_ms"], float | int) for r in requests)
    warm_up_only = {path for _, path in WARM_UP_REQUESTS} - {"/healthz", "/api/v1/jobs"}
    assert not [r for r in requests if r["path"] in warm_up_only and r["principal"] == "-"]
    unauthenticated = [r for r in log if r.get("status") == 401]
    assert len(unauthenticated) == 2  # the one request above: its error and its access line
    assert not [r for r in log if "warm-up" in json.dumps(r) or "http://warm-up" in json.dumps(r)]


def test_the_text_log_has_one_readable_line_per_event(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_server(
        data_dir,
        cluster=CLUSTER_FILE,
        policy=POLICY_FILE,
        environment=ENVIRONMENT,
        separate_stderr=True,
    ) as running:
        admin = admin_of(running)
        assert admin.post("/jobs", json=job_running("text-1", "nlp")).status_code == 201
        node = admin.get("/nodes").json()[-1]["name"]
        assert admin.post(f"/nodes/{node}/cordon").status_code == 200
        assert admin.post("/jobs", json={"format": "nope"}).status_code == 422

        def admitted() -> list[str]:
            return [line for line in running.log_lines() if " admitted " in line]

        [line] = wait_for(admitted, bool)
    lines = running.log_lines()
    assert all(not line.startswith("{") for line in lines)
    assert " INFO admitted job=text-1 team=nlp " in line and " gpus=16 nodes=2 " in line
    assert "span=network-node-layer-1:1,network-node-layer-2:1,network-node-layer-3:1" in line
    [cordon] = [entry for entry in lines if " node_cordoned " in entry]
    assert f"node={node} actor=admin" in cordon
    [error] = [entry for entry in lines if " api_error " in entry]
    assert "status=422 code=invalid_request method=POST path=/api/v1/jobs" in error
    [started] = [entry for entry in lines if " server_started " in entry]
    assert " server_started url=http://127.0.0.1:" in started and " store=sqlite " in started
    assert not [entry for entry in lines if " request " in entry]  # no access log by default
    assert not [entry for entry in lines if "alembic" in entry or "warm" in entry]
