"""A real ``topoq server --executor slurm`` on the Slurm bed: its nodes and switches come from
Slurm, an admitted gang is one Slurm job on exactly the placed nodes with its ranks in its
output, an admin's drain or a node going down reaches topoq, a node set DOWN under a gang
requeues it onto healthy nodes, a reclaim stops the borrower with SIGTERM before the lender's
job starts, and a server killed while Slurm jobs run adopts them instead of starting them
again."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.executors.launches import wait_until
from topoq.discovery.hostlist import expand_hostlist
from topoq.testbeds.slurm import SlurmBed, node_states, reset, run_slurm
from topoq.testing.server import RunningServer, running_server

LOST = "off-a-down-node"
"""A job name the executor contract does not use (Slurm keeps ended jobs for ten minutes)."""
POLICY = Path(__file__).resolve().parents[2] / "examples" / "policies" / "slurm.yaml"
LEAF = "topology.topoq.io/slurm-switch-3"
SPINE = "topology.topoq.io/slurm-switch-2"
SAY_WHERE = (
    "echo rank=$RANK world=$WORLD_SIZE procid=$SLURM_PROCID node=$SLURMD_NODENAME "
    "topoq_node=$TOPOQ_NODE master=$MASTER_ADDR hosts=$TOPOQ_HOSTS gpus=$CUDA_VISIBLE_DEVICES"
)
CHECKPOINT = (
    "trap 'echo got SIGTERM at $(date +%s.%N); sleep 1; echo checkpoint saved; exit 0' TERM; "
    "echo began at $(date +%s.%N); while :; do sleep 0.1; done"
)


def api(server: RunningServer) -> httpx.Client:
    token = (server.data_dir / "admin-token").read_text().strip()
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=20
    )


def submit(
    http: httpx.Client,
    name: str,
    team: str,
    nodes: int,
    script: str,
    *,
    required: str | None = LEAF,
    priority: str | None = None,
) -> None:
    pod_set: dict[str, Any] = {
        "name": "workers",
        "count": nodes,
        "requests": {"nvidia.com/gpu": 8},
        "command": ["bash", "-c", script],
    }
    if required:
        pod_set["topology"] = {"required": required}
    spec: dict[str, Any] = {"podSets": [pod_set]}
    if priority:
        spec["priorityClassName"] = priority
    document = {"apiVersion": "topoq.io/v1", "kind": "Job", "metadata": {"name": name}}
    answer = http.post(
        "/jobs", json={"format": "topoq", "team": team, "document": {**document, "spec": spec}}
    )
    assert answer.status_code == 201, answer.text


def job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    answer = http.get(f"/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def phase_is(http: httpx.Client, job_id: str, *phases: str) -> bool:
    return job(http, job_id)["phase"] in phases


def placed_nodes(http: httpx.Client, job_id: str) -> list[str]:
    return sorted(job(http, job_id)["allocation"]["nodes"])


def slurm_jobs(bed: SlurmBed, name: str) -> list[dict[str, str]]:
    """Every Slurm job of topoq's job ``name`` (``scontrol show job`` fields)."""
    out = run_slurm(bed, ["scontrol", "show", "job", "--oneliner"], check=False).stdout
    found = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("JobName") == f"topoq-{name}":
            found.append(fields)
    return found


def logs(http: httpx.Client, job_id: str, pod: int) -> str:
    answer = http.get(f"/jobs/{job_id}/logs", params={"pod": pod})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["text"])


@pytest.fixture
def server(slurm_bed: SlurmBed, tmp_path: Path) -> Iterator[RunningServer]:
    options = ["--executor", "slurm", "--slurm-conf", str(slurm_bed.slurm_conf)]
    with running_server(tmp_path / "data", *options, policy=POLICY) as running:
        yield running
    reset(slurm_bed)


def test_a_gang_is_one_slurm_job_on_exactly_its_placed_nodes_with_its_ranks(
    slurm_bed: SlurmBed, server: RunningServer
) -> None:
    http = api(server)
    wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
    nodes = {n["name"]: n for n in http.get("/nodes").json()}
    assert set(nodes) == set(slurm_bed.nodes)
    assert all(n["gpus"] == 8 and n["ready"] and not n["cordoned"] for n in nodes.values())
    submit(http, "ranks", "nlp", 4, SAY_WHERE + "; sleep 30")
    wait_until(lambda: phase_is(http, "ranks", "running"), 30, "the gang to run")
    placed = placed_nodes(http, "ranks")
    [slurm] = slurm_jobs(slurm_bed, "ranks")
    assert sorted(expand_hostlist(slurm["NodeList"])) == placed  # read back from Slurm
    assert slurm["Comment"] == "topoq:1:nlp:ranks" and slurm["Partition"] == "topoq"
    leaves = {placed[0][:-1]}  # the bed's leaves are n00-n03, n04-n07, …
    assert len(placed) == 4 and int(placed[0][1:]) % 4 == 0 and len(leaves) == 1
    for rank in range(4):
        wait_until(lambda r=rank: "rank=" in logs(http, "ranks", r), 20, f"pod {rank}'s line")
        line = logs(http, "ranks", rank)
        assert f"rank={rank} world=4 procid={rank} " in line
        node = re.search(r"node=(\S+)", line)
        assert node is not None and node.group(1) == placed[rank]
        assert f"topoq_node={placed[rank]}" in line
        assert "master=127.0.0.1" in line and f"hosts={','.join(placed)}" in line
        assert "gpus=0,1,2,3,4,5,6,7" in line


def test_a_drain_and_a_down_node_made_in_slurm_reach_topoq_and_go_back(
    slurm_bed: SlurmBed, server: RunningServer
) -> None:
    http = api(server)
    wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
    run_slurm(slurm_bed, ["scontrol", "update", "NodeName=n09", "State=DRAIN", "Reason=fix"])
    run_slurm(slurm_bed, ["scontrol", "update", "NodeName=n10", "State=DOWN", "Reason=dead"])

    def node(name: str) -> dict[str, Any]:
        return dict({n["name"]: n for n in http.get("/nodes").json()}[name])

    wait_until(lambda: node("n09")["cordoned"] and not node("n10")["ready"], 10, "the states")
    assert node("n09")["ready"]
    for name in ("n09", "n10"):
        run_slurm(slurm_bed, ["scontrol", "update", f"NodeName={name}", "State=RESUME"])
    wait_until(lambda: not node("n09")["cordoned"] and node("n10")["ready"], 20, "the nodes back")


def test_a_node_set_down_under_a_running_gang_requeues_it_onto_healthy_nodes(
    slurm_bed: SlurmBed, server: RunningServer
) -> None:
    http = api(server)
    wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
    submit(http, LOST, "vision", 4, "sleep 600")
    wait_until(lambda: phase_is(http, LOST, "running"), 30, "the gang to run")
    first = placed_nodes(http, LOST)
    run_slurm(slurm_bed, ["scontrol", "update", f"NodeName={first[1]}", "State=DOWN", "Reason=x"])

    def running_elsewhere() -> bool:
        now = job(http, LOST)  # one read: a requeue between two would leave no allocation
        return now["phase"] == "running" and sorted(now["allocation"]["nodes"]) != first

    wait_until(running_elsewhere, 60, "the gang to run again elsewhere")
    again = placed_nodes(http, LOST)
    assert first[1] not in again and len(set(again)) == 4
    runs = slurm_jobs(slurm_bed, LOST)
    assert sorted(r["JobState"] for r in runs) == ["NODE_FAIL", "RUNNING"], [
        (r["JobId"], r["JobState"], r["NodeList"], r["Comment"], r.get("Reason")) for r in runs
    ]
    [running] = [r for r in runs if r["JobState"] == "RUNNING"]
    assert sorted(expand_hostlist(running["NodeList"])) == again
    assert running["Comment"] == f"topoq:2:vision:{LOST}"


def test_reclaim_stops_the_borrower_with_sigterm_before_the_lender_starts(
    slurm_bed: SlurmBed, server: RunningServer
) -> None:
    http = api(server)
    wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
    # vision is guaranteed 48 GPUs (6 nodes) and borrows 48 more: 12 of the 16 nodes
    submit(http, "borrower", "vision", 12, CHECKPOINT, required=None)
    wait_until(lambda: phase_is(http, "borrower", "running"), 30, "the borrower to run")
    wait_until(lambda: "began" in logs(http, "borrower", 0), 20, "the borrower's pods")
    # nlp asks for its own 48 GPUs: 4 nodes are idle, the rest is reclaimed
    submit(http, "lender", "nlp", 6, "echo began at $(date +%s.%N); sleep 600", required=SPINE)
    wait_until(lambda: phase_is(http, "lender", "running"), 60, "the lender to run")
    said = logs(http, "borrower", 0)
    assert "got SIGTERM" in said and "checkpoint saved" in said
    history = job(http, "borrower")["history"]
    assert any("PREEMPTED_FOR_RECLAIM" in str(change) for change in history), history
    stopped_at = float(re.findall(r"got SIGTERM at (\S+)", said)[0]) + 1.0  # its checkpoint
    lender_began = float(re.findall(r"began at (\S+)", logs(http, "lender", 0))[0])
    assert lender_began >= stopped_at  # no node was booked twice
    [first] = [r for r in slurm_jobs(slurm_bed, "borrower") if r["JobState"] != "RUNNING"]
    assert first["JobState"] in ("COMPLETED", "CANCELLED")


def test_a_server_killed_while_slurm_jobs_run_adopts_them_and_starts_none_twice(
    slurm_bed: SlurmBed, tmp_path: Path
) -> None:
    options = ["--executor", "slurm", "--slurm-conf", str(slurm_bed.slurm_conf)]
    data = tmp_path / "data"
    with running_server(data, *options, policy=POLICY) as first:
        http = api(first)
        submit(http, "long", "nlp", 2, "echo began; sleep 15")
        wait_until(lambda: phase_is(http, "long", "running"), 30, "the gang to run")
        [before] = slurm_jobs(slurm_bed, "long")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
    try:
        with running_server(data, *options) as second:
            http = api(second)
            assert phase_is(http, "long", "running")
            wait_until(lambda: phase_is(http, "long", "succeeded"), 40, "the adopted gang to end")
            [after] = slurm_jobs(slurm_bed, "long")  # the same Slurm job, never a second one
            assert after["JobId"] == before["JobId"] and after["JobState"] == "COMPLETED"
            assert job(http, "long")["failures"] == 0
    finally:
        run_slurm(slurm_bed, ["scancel", f"--partition={slurm_bed.partition}"], check=False)


def test_a_node_topoq_failed_is_resumed_by_its_recover_but_an_admins_down_is_not(
    slurm_bed: SlurmBed, server: RunningServer
) -> None:
    http = api(server)
    wait_until(lambda: len(http.get("/nodes").json()) == 16, 20, "Slurm's nodes")
    states = lambda: node_states(slurm_bed)  # noqa: E731 - read anew each time
    assert http.post("/nodes/n05/fail").status_code == 200
    wait_until(lambda: states()["n05"].startswith("down"), 20, "Slurm to hold n05 DOWN")
    assert http.post("/nodes/n05/recover").status_code == 200
    wait_until(lambda: states()["n05"] == "idle", 20, "Slurm to resume n05")
    run_slurm(slurm_bed, ["scontrol", "update", "NodeName=n06", "State=DOWN", "Reason=bad-gpu"])
    wait_until(lambda: not node_of(http, "n06")["ready"], 20, "topoq to see n06 down")
    assert http.post("/nodes/n06/recover").status_code == 200
    wait_until(lambda: not node_of(http, "n06")["ready"], 20, "the cluster's DOWN to win again")
    shown = run_slurm(slurm_bed, ["sinfo", "--json"]).stdout
    assert states()["n06"].startswith("down") and '"reason": "bad-gpu"' in shown


def node_of(http: httpx.Client, name: str) -> dict[str, Any]:
    return dict({n["name"]: n for n in http.get("/nodes").json()}[name])
