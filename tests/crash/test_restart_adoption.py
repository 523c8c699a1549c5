"""Running work survives a control-plane crash: SIGKILL a real `topoq server` while gangs run
(and while more are submitted), start it again on the same data directory, and the gangs keep
their processes, their attempt and their nodes, and end as their pods do — no requeue. A gang
that lost a pod while no server watched is requeued, alone; a pod that ended while the server
was down is reported when it comes back."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.crash.harness import ServerProcess, live_pods
from tests.crash.test_control_plane_races import api
from topoq.testing.server import whole_node_submission

WAIT_S = 60.0


def wait_until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)
    return found


def submit(client: httpx.Client, job: str, team: str, command: list[str]) -> None:
    body = whole_node_submission(job, team)
    body["document"]["spec"]["podSets"][0]["command"] = command  # type: ignore[index]
    assert client.post("/jobs", json=body).status_code == 201


def phase(client: httpx.Client, job: str) -> tuple[str, int]:
    """The job's phase and its attempt (how many times it was admitted)."""
    found = client.get(f"/jobs/{job}").json()
    return found["phase"], sum(step["phase"] == "admitted" for step in found["history"])


def pods_by_job(server: ServerProcess) -> dict[str, set[int]]:
    """Each job's pod commands (the shells; not the short sleeps they run)."""
    found: dict[str, set[int]] = {}
    for pod in live_pods(server.run_id):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pod.pid}/comm").read_text().strip() == "sh":
                found.setdefault(pod.job, set()).add(pod.pid)
    return found


def _every_pod(server: ServerProcess, jobs: int) -> dict[str, set[int]] | None:
    found = pods_by_job(server)
    return found if len(found) == jobs else None


def test_running_gangs_keep_their_pods_across_a_sigkill_and_end_as_their_pods_do(
    server: ServerProcess, tmp_path: Path
) -> None:
    server.start()
    go = tmp_path / "go"
    finish = ["/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.2; done; echo done; exit 0"]
    fail = ["/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.2; done; exit 3"]
    early = tmp_path / "early"
    ends = ["/bin/sh", "-c", f"while [ ! -e {early} ]; do sleep 0.1; done; exit 0"]
    with api(server) as client:
        for job in ("keep-a", "keep-b"):
            submit(client, job, "nlp", finish)
        submit(client, "keep-fails", "vision", fail)
        submit(client, "torn", "vision", finish)
        submit(client, "ends-while-down", "nlp", ends)
        jobs = ("keep-a", "keep-b", "keep-fails", "torn", "ends-while-down")
        wait_until(lambda: all(phase(client, j) == ("running", 1) for j in jobs), "all run")
        before = wait_until(lambda: _every_pod(server, len(jobs)), "every pod is up")

    server.kill()  # no shutdown code runs
    early.touch()  # its pod ends, exit 0, while no server watches
    for pid in before["torn"]:  # its pod lost, keeper and all, while no server watches
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    time.sleep(1.0)
    server.start()

    with api(server) as client:
        for job in ("keep-a", "keep-b", "keep-fails"):
            assert phase(client, job) == ("running", 1), job
            assert pods_by_job(server)[job] == before[job], f"{job}'s pods were replaced"
        wait_until(lambda: phase(client, "ends-while-down") == ("succeeded", 1), "its end")
        # the torn gang alone goes back to the queue and runs again, as attempt 2
        wait_until(lambda: phase(client, "torn") == ("running", 2), "the torn gang's retry")
        history = client.get("/jobs/torn/history").json()["history"]
        assert any("restarted" in step["cause"] for step in history), history
        go.touch()
        for job in ("keep-a", "keep-b"):
            wait_until(lambda job=job: phase(client, job)[0] == "succeeded", f"{job} to end")
            assert phase(client, job) == ("succeeded", 1)
            steps = client.get(f"/jobs/{job}/history").json()["history"]
            assert [step["phase"] for step in steps] == [
                "pending",
                "admitted",
                "running",
                "succeeded",
            ], steps
        wait_until(lambda: phase(client, "keep-fails")[0] in ("failed", "pending"), "its end")
        history = client.get("/jobs/keep-fails/history").json()["history"]
        assert any("a pod exited 3" in step["cause"] for step in history), history
        logs = client.get("/jobs/keep-a/logs").json()["text"]
        assert "done" in logs
        nodes = client.get("/nodes").json()
        assert all(node["gpusUsed"] <= node["gpus"] for node in nodes)
