"""No single fault or race wedges a real ``topoq server``: a gang the executor cannot start
fails alone and frees its GPUs; 80 concurrent cordons and a node failure sent with cordons all
stick; 64 gangs exiting while half of them are cancelled leave no GPU booked and every job where
its last change says. Driven through the HTTP API with concurrent clients, on SQLite and (for
the node actions) PostgreSQL."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash.harness import REQUEST_TIMEOUT_S, ServerProcess, kill_pods, live_pods
from tests.store.conftest import BACKENDS
from topoq.testing.postgres import PostgresServer

TEAMS = ("nlp", "vision")
WAIT_S = 60.0


def cluster_file(directory: Path, shape: list[int]) -> Path:
    path = directory / "cluster.yaml"
    path.write_text(
        "apiVersion: topoq.io/v1\nkind: Cluster\nmetadata: {name: races}\nlevels:\n"
        "  - topology.k8s.aws/network-node-layer-1\n  - topology.k8s.aws/network-node-layer-2\n"
        "  - topology.k8s.aws/network-node-layer-3\n  - kubernetes.io/hostname\n"
        f"generate: {{shape: {shape}, instance_type: ml.p5.48xlarge, name_prefix: p5-}}\n"
    )
    return path


def policy_file(directory: Path, instances_per_team: int) -> Path:
    path = directory / "policy.yaml"
    teams = "".join(
        f"- name: {name}\n  quotas: [{{flavor: ml.p5.48xlarge, instances: {instances_per_team}}}]\n"
        for name in TEAMS
    )
    path.write_text(
        f"apiVersion: topoq.io/v1\nkind: Policy\nmetadata: {{name: races}}\nteams:\n{teams}"
    )
    return path


def job_body(job_id: str, team: str, command: list[str] | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}
    if command is not None:
        pod_set["command"] = command
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": job_id},
        "spec": {"podSets": [pod_set]},
    }
    return {"format": "topoq", "team": team, "document": document}


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(shape: list[int], database_url: str | None = None) -> ServerProcess:
        inputs = tmp_path / "inputs"
        inputs.mkdir(exist_ok=True)
        nodes = 1
        for width in shape:
            nodes *= width
        server = ServerProcess(
            tmp_path / "data",
            uuid.uuid4().hex,
            pod_sleep_s=30.0,
            cluster=cluster_file(inputs, shape),
            policy=policy_file(inputs, nodes // 2),
            database_url=database_url,
        )
        server.data_dir.mkdir()
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()
        kill_pods(server.run_id)


def api(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1",
        headers={"Authorization": f"Bearer {server.token()}"},
        timeout=REQUEST_TIMEOUT_S,
    )


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = threading.Event()
    timer = threading.Timer(WAIT_S, deadline.set)
    timer.start()
    try:
        while not check():
            assert not deadline.is_set(), f"timed out waiting until {what}"
            deadline.wait(0.1)
    finally:
        timer.cancel()


def concurrently(actions: list[Callable[[], Any]]) -> list[Any]:
    """Every action in its own thread, released together; their results in order."""
    gate = threading.Barrier(len(actions))
    results: list[Any] = [None] * len(actions)

    def run(index: int) -> None:
        gate.wait()
        results[index] = actions[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def holding(client: httpx.Client) -> int:
    """How many jobs hold capacity (admitted or running)."""
    phases = ("admitted", "running")
    return sum(client.get("/jobs", params={"phase": p}).json()["total"] for p in phases)


def gpus_used(client: httpx.Client) -> int:
    return sum(node["gpusUsed"] for node in client.get("/nodes").json())


def test_a_gang_the_executor_cannot_start_fails_alone_and_frees_its_gpus(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server([1, 2, 2, 2])
    work_dir = server.data_dir / "runs"
    with api(server) as client:
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.write_text("the work directory is a file: every pod start fails")
        assert client.post("/jobs", json=job_body("blocked", "nlp")).status_code == 201
        wait_until(lambda: client.get("/jobs/blocked").json()["phase"] == "failed", "it fails")
        history = client.get("/jobs/blocked/history").json()["history"]
        assert history[-1]["cause"].startswith("START_FAILED: ")
        assert str(work_dir) in history[-1]["cause"]  # the executor's own message
        assert "START_FAILED" in client.get("/jobs/blocked/explain").json()["message"]
        assert gpus_used(client) == 0
        work_dir.unlink()  # the fault is gone: the next gangs start
        for name in ("after-1", "after-2"):
            assert client.post("/jobs", json=job_body(name, "nlp")).status_code == 201
        for name in ("after-1", "after-2"):
            wait_until(
                lambda name=name: client.get(f"/jobs/{name}").json()["phase"] == "running",
                f"{name} runs",
            )


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_concurrent_node_actions_over_http_all_stick(
    start_server: Callable[..., ServerProcess], database_url: str | None
) -> None:
    server = start_server([1, 2, 5, 8], database_url)  # 80 nodes
    with api(server) as client:
        names = [node["name"] for node in client.get("/nodes").json()]
        assert len(names) == 80
        cordons = concurrently(
            [lambda name=name: client.post(f"/nodes/{name}/cordon").status_code for name in names]
        )
        assert cordons == [200] * 80
        assert all(node["cordoned"] for node in client.get("/nodes").json())
        for name in names:
            client.post(f"/nodes/{name}/uncordon")
        for round_number in range(5):
            group = names[round_number * 8 : round_number * 8 + 8]
            failed = group[0]
            actions = [lambda failed=failed: client.post(f"/nodes/{failed}/fail").status_code]
            actions += [
                lambda name=name: client.post(f"/nodes/{name}/cordon").status_code
                for name in group[1:]
            ]
            assert concurrently(actions) == [200] * 8
            state = {node["name"]: node for node in client.get("/nodes").json()}
            assert not state[group[0]]["ready"], f"round {round_number}: the failure was lost"
            assert all(state[name]["cordoned"] for name in group[1:]), f"round {round_number}"


def test_mass_exits_racing_cancels_over_http_lose_no_event(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = start_server([1, 2, 4, 8])  # 64 nodes: every gang runs at once
    go = tmp_path / "go"
    # 64 pods poll for the file: at 0.02 s that was 3,200 forks a second, enough on a loaded
    # 2-core machine to keep the last pods from starting within the wait
    command = ["/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.25; done"]
    names = [f"gang-{n:02d}" for n in range(64)]
    with api(server) as client:
        for number, name in enumerate(names):
            body = job_body(name, TEAMS[number % 2], command)
            assert client.post("/jobs", json=body).status_code == 201
        running = {"phase": "running", "limit": 100}
        wait_until(lambda: client.get("/jobs", params=running).json()["total"] == 64, "all run")
        go.touch()
        answers = concurrently(
            [
                lambda name=name: client.post(f"/jobs/{name}/cancel").status_code
                for name in names[::2]
            ]
        )
        cancelled = {
            name for name, status in zip(names[::2], answers, strict=True) if status == 200
        }
        assert set(answers) <= {200, 409}  # 409: it had already succeeded
        wait_until(lambda: holding(client) == 0, "every job ends")
        for name in names:
            expected = "cancelled" if name in cancelled else "succeeded"
            assert client.get(f"/jobs/{name}").json()["phase"] == expected, name
        assert gpus_used(client) == 0
        wait_until(lambda: not live_pods(server.run_id), "every pod is gone")
