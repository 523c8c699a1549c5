"""The starvation guard over a real ``topoq server`` (SQLite, local executor, pods sleeping
60 s): three 2-node jobs limited to 40 s run; an 8-node gang without topology constraints
waits. Once it has waited past the guard (2 s) it holds the cluster with an ETA from the
fillers' limits: a 1-node job without a time limit waits for it, one limited to 5 s
backfills at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import TEAM, small_job
from tests.api.test_server import wait_for
from tests.api.test_time_limits_server import server_with_policy

POLICY = f"""\
apiVersion: topoq.io/v1
kind: Policy
metadata: {{name: starvation}}
scheduling:
  starvationGuardS: 2s
teams:
- name: {TEAM}
  quotas:
  - {{flavor: ml.p5.48xlarge, instances: 8}}
"""


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "starvation", POLICY)


def unconstrained(name: str, pods: int, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {**small_job(name, pods=pods, team=TEAM), **fields}
    body["document"]["spec"]["podSets"][0]["topology"] = {"unconstrained": True}
    return body


def phase(admin: httpx.Client, job: str) -> str:
    return str(admin.get(f"/jobs/{job}").json()["phase"])


def test_a_starving_gang_holds_the_cluster_and_only_a_short_job_backfills(
    admin: httpx.Client,
) -> None:
    fillers = [f"fill-{i}" for i in range(3)]
    for name in fillers:
        body = {**small_job(name, pods=2, team=TEAM), "time_limit_s": 40}
        assert admin.post("/jobs", json=body).status_code == 201, name
    for name in fillers:
        wait_for(lambda n=name: phase(admin, n), lambda p: p == "running")
    assert admin.post("/jobs", json=unconstrained("gang", 8)).status_code == 201
    held = wait_for(
        lambda: admin.get("/jobs/gang/explain").json(),
        lambda e: e.get("etaAt") is not None and e["reason"] == "TOPOLOGY_UNSATISFIABLE",
    )
    starts = []
    for name in fillers:
        history = admin.get(f"/jobs/{name}").json()["history"]
        starts.append(next(c["at"] for c in history if c["phase"] == "running"))
    assert held["etaAt"] == pytest.approx(max(starts) + 40, abs=1.5), held
    wait_for(lambda: None, lambda _: False, timeout_s=2.5)  # the gang now starves
    assert admin.post("/jobs", json=unconstrained("open", 1)).status_code == 201
    assert admin.post("/jobs", json=unconstrained("quick", 1, time_limit_s=5)).status_code == 201
    assert wait_for(lambda: phase(admin, "quick"), lambda p: p == "running") == "running"
    kept = wait_for(
        lambda: admin.get("/jobs/open/explain").json(),
        lambda e: e["reason"] == "RESERVED_FOR_LARGER_GANG",
    )
    assert kept["reason"] == "RESERVED_FOR_LARGER_GANG", kept
    assert kept["numbers"]["held_for"] == "gang"
    assert any("time limit of at most" in remedy for remedy in kept["remedies"]), kept
    assert phase(admin, "open") == "pending"
    for name in [*fillers, "gang", "open", "quick"]:
        admin.post(f"/jobs/{name}/cancel")
