"""GPU shares through a real ``topoq server`` (SQLite, local executor, pods that sleep): pods
that ask for half a GPU are packed onto one device of a node open to shares, see that device
as CUDA_VISIBLE_DEVICES, count as fractions of their team's GPU quota, keep whole-GPU pods off
partly shared devices, and after a restart of the server the devices they hold stay taken.
Issue 14 §4; docs/gpu-sharing.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import Api
from tests.api.test_server import client, wait_for
from topoq.domain.gpu_share import GPU_SHARING_LABEL
from topoq.executors.local.executor import LOCAL_CAPABILITIES
from topoq.executors.slurm.executor import SLURM_CAPABILITIES
from topoq.testing.server import running_server, submission

TEAM = "nlp"
CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata: {name: gpu-shares}
levels: [topology.k8s.aws/network-node-layer-3, kubernetes.io/hostname]
generate:
  shape: [1, 2]
  instance_type: ml.p5.48xlarge
  name_prefix: p5-
  labels: {topoq.io/gpu-sharing: "true"}
"""
POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: gpu-shares}
teams:
- name: nlp
  sharing: Lend
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 1}
- name: vision
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 1}
"""


def job(name: str, pods: int, gpus: str | int, team: str = TEAM) -> dict[str, object]:
    return submission(name, team, pods, {"nvidia.com/gpu": gpus, "cpu": 2})


def submit_in_process(api: Api, body: dict[str, object]) -> httpx.Response:
    """``POST /jobs`` of ``body`` as a member of nlp, to the in-process API."""
    return api.client.post("/api/v1/jobs", json=body, headers=api.headers("member"))


def start(data_dir: Path) -> Any:
    files = data_dir.parent
    (files / "cluster.yaml").write_text(CLUSTER)
    (files / "policy.yaml").write_text(POLICY)
    return running_server(
        data_dir,
        cluster=files / "cluster.yaml",
        policy=files / "policy.yaml",
        environment=os.environ | {"TOPOQ_SLEEP_S": "120"},
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("shares") / "data"
    data_dir.mkdir()
    with start(data_dir) as running:
        yield running.url, data_dir


@pytest.fixture(scope="module")
def admin(server: tuple[str, Path]) -> httpx.Client:
    url, data_dir = server
    return client(url, (data_dir / "admin-token").read_text().strip())


def running(admin: httpx.Client, name: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        lambda: admin.get(f"/jobs/{name}").json(),
        lambda j: j["phase"] == "running" or j.get("reason") not in (None, "NOT_YET_CONSIDERED"),
    )
    assert found["phase"] == "running", found
    return found


def devices(found: dict[str, Any]) -> list[tuple[str, list[list[int]]]]:
    return [(a["node"], a["gpuDevices"]) for a in found["allocation"]["assignments"]]


def log_lines(admin: httpx.Client, name: str, pods: int) -> list[str]:
    def read() -> str:
        return "".join(
            admin.get(f"/jobs/{name}/logs", params={"pod": pod}).json()["text"]
            for pod in range(pods)
        )

    text = wait_for(read, lambda t: t.count("CUDA_VISIBLE_DEVICES") == pods)
    return [line for line in text.splitlines() if "CUDA" in line or "GPU share" in line]


def nlp_used_gpus(admin: httpx.Client) -> float:
    teams = admin.get("/teams").json()
    return sum(
        flavor["usedGpus"] for team in teams if team["name"] == TEAM for flavor in team["flavors"]
    )


@pytest.fixture(scope="module")
def notebooks(admin: httpx.Client) -> dict[str, Any]:
    """nlp's three pods of half a GPU, running."""
    made = admin.post("/jobs", json=job("notebooks", 3, "0.5"))
    assert made.status_code == 201, made.text
    return running(admin, "notebooks")


def test_half_gpu_pods_share_a_device_see_it_and_count_as_fractions(
    admin: httpx.Client, notebooks: dict[str, Any]
) -> None:
    found = notebooks
    assert found["gpus"] == 1.5
    ((node, picked),) = devices(found)
    assert picked == [[0], [0], [1]]  # the second half goes beside the first
    assert log_lines(admin, "notebooks", 3) == [
        "CUDA_VISIBLE_DEVICES=0",
        "GPU share 0.5",
        "CUDA_VISIBLE_DEVICES=0",
        "GPU share 0.5",
        "CUDA_VISIBLE_DEVICES=1",
        "GPU share 0.5",
    ]
    assert nlp_used_gpus(admin) == 1.5
    nodes = {n["name"]: n for n in admin.get("/nodes").json()}
    assert nodes[node]["gpusUsed"] == 1.5


def test_the_api_shows_a_share_as_it_was_asked(
    admin: httpx.Client, notebooks: dict[str, Any]
) -> None:
    """Not as the resource it is kept as (``topoq.io/gpu-milli``): a pod set's requests say
    ``nvidia.com/gpu: "0.5"``, the allocation's usage the gang's 1.5, and the CLI's describe
    and the dashboard (which show these as they come) say the same."""
    (pod_set,) = notebooks["workload"]["podSets"]
    assert pod_set["requests"] == {"cpu": "2", "nvidia.com/gpu": "0.5"}
    (usage,) = notebooks["allocation"]["usage"].values()
    assert usage["nvidia.com/gpu"] == "1.5" and "topoq.io/gpu-milli" not in usage
    assert "gpu-milli" not in admin.get("/jobs/notebooks").text


def test_a_whole_gpu_pod_takes_whole_devices_on_the_node_shares_left_whole(
    admin: httpx.Client, notebooks: dict[str, Any]
) -> None:
    shared = devices(notebooks)[0][0]
    made = admin.post("/jobs", json=job("trainer", 1, 8, team="vision"))
    assert made.status_code == 201, made.text
    ((node, picked),) = devices(running(admin, "trainer"))
    assert node != shared and picked == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert log_lines(admin, "trainer", 1) == ["CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"]


def test_shares_count_against_the_teams_gpu_quota(
    admin: httpx.Client, notebooks: dict[str, Any]
) -> None:
    """nlp may use 8 GPUs and borrow none: 1.5 are used, so 6 whole GPUs and one half fit, and
    one more half does not, with a message in GPUs."""
    assert admin.post("/jobs", json=job("six", 1, 6)).status_code == 201
    assert admin.post("/jobs", json=job("half", 1, "500m")).status_code == 201
    running(admin, "six"), running(admin, "half")
    assert nlp_used_gpus(admin) == 8
    assert admin.post("/jobs", json=job("one-half-too-many", 1, "0.5")).status_code == 201
    waiting = wait_for(
        lambda: admin.get("/jobs/one-half-too-many/explain").json(),
        lambda j: j.get("reason") == "WAITING_FOR_QUOTA",
    )
    assert waiting["phase"] == "pending" and waiting["reason"] == "WAITING_FOR_QUOTA", waiting
    assert "uses 8/8 nvidia.com/gpu" in waiting["message"]
    assert "needs 0.5 nvidia.com/gpu more" in waiting["message"]
    assert waiting["numbers"]["requested"] == "0.5"


@pytest.mark.parametrize(
    ("gpus", "words"),
    [("1.5", "neither whole GPUs nor a share"), ("0.0001", "neither whole GPUs nor a share")],
)
def test_an_ask_that_is_not_whole_gpus_or_a_share_of_one_is_a_422_that_says_what_to_write(
    admin: httpx.Client, gpus: str, words: str
) -> None:
    refused = admin.post("/jobs", json=job("bad", 1, gpus))
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert words in detail["message"] and "0.5" in detail["hint"]
    assert admin.get("/jobs/bad").status_code == 404


def test_a_share_on_a_cluster_with_no_node_open_to_shares_is_refused(api: Api) -> None:
    refused = submit_in_process(api, job("share", 1, "0.5"))
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "no node of the cluster is open to GPU shares" in detail["message"]
    assert "topoq.io/gpu-sharing" in detail["hint"]


def test_after_a_restart_the_devices_shares_hold_stay_taken(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data_dir = tmp_path_factory.mktemp("restart") / "data"
    data_dir.mkdir()
    with start(data_dir) as first:
        admin = client(first.url, (data_dir / "admin-token").read_text().strip())
        assert admin.post("/jobs", json=job("before", 3, "0.6")).status_code == 201
        before = devices(running(admin, "before"))
    with start(data_dir) as second:
        admin = client(second.url, (data_dir / "admin-token").read_text().strip())
        assert running(admin, "before")["allocation"]["assignments"][0]["gpuDevices"]
        assert admin.post("/jobs", json=job("after", 1, "0.4")).status_code == 201
        after = devices(running(admin, "after"))
    # three pods of 0.6 took devices 0, 1 and 2 of one node: the 0.4 fills device 0 beside one
    assert before[0][1] == [[0], [1], [2]]
    assert after == [(before[0][0], [[0]])]


def test_a_share_is_refused_where_the_executor_cannot_give_a_pod_part_of_a_gpu(api: Api) -> None:
    """Nodes open to shares, but a Slurm executor: the job would fail at every start, so it
    is refused at submission, naming the executor that can."""
    opened = [
        replace(node, labels={**node.labels, GPU_SHARING_LABEL: "true"})
        for node in api.store.nodes()
    ]
    api.store.save_nodes(opened, actor="test", now=1)
    api.service.executor = SLURM_CAPABILITIES
    refused = submit_in_process(api, job("share", 1, "0.5"))
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "the slurm executor cannot give a pod part of a GPU" in detail["message"]
    assert "--executor local" in detail["hint"]
    whole = submit_in_process(api, job("whole", 1, 1))
    assert whole.status_code == 201, whole.text
    api.service.executor = LOCAL_CAPABILITIES
    allowed = submit_in_process(api, job("share", 1, "0.5"))
    assert allowed.status_code == 201, allowed.text
