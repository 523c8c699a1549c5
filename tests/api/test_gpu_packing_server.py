"""Packing by fragmentation through a real ``topoq server`` (SQLite, local executor, pods that
sleep; issue 14 §4, docs/gpu-sharing.md "Packing by fragmentation"): a single pod that asks for
a share goes where it leaves the idle GPU most usable by the pods the server's jobs ask for,
not onto the tightest device. Half a GPU runs on device 0; a 0.3 share then takes a whole
device (the tightest, device 0, would keep 0.2 that neither a half nor a 0.3 can use), and the
next half fills device 0 — each pod seeing its device as CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_gpu_shares_server import devices, job, log_lines, running, start
from tests.api.test_server import client


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir = tmp_path_factory.mktemp("packing") / "data"
    data_dir.mkdir()
    with start(data_dir) as server:
        yield client(server.url, (data_dir / "admin-token").read_text().strip())


def test_a_share_is_packed_where_it_leaves_no_sliver_for_the_pods_that_come(
    admin: httpx.Client,
) -> None:
    placed = {}
    for name, gpus in (("half", "0.5"), ("third", "0.3"), ("half-2", "0.5")):
        made = admin.post("/jobs", json=job(name, 1, gpus))
        assert made.status_code == 201, made.text
        ((node, picked),) = devices(running(admin, name))
        placed[name] = (node, picked)
    node = placed["half"][0]
    assert placed == {
        "half": (node, [[0]]),
        "third": (node, [[1]]),  # a whole device: 0.7 left holds a half or a 0.3
        "half-2": (node, [[0]]),  # fills device 0
    }
    assert log_lines(admin, "third", 1) == ["CUDA_VISIBLE_DEVICES=1", "GPU share 0.3"]
    nodes = {n["name"]: n for n in admin.get("/nodes").json()}
    assert nodes[node]["gpusUsed"] == 1.3
