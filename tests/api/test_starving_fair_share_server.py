"""A job the starvation guard started is not preempted for fair share, through a real ``topoq
server`` (SQLite, the local executor): team ``a`` (weight 1) and team ``b`` (weight 3) share
the 8-node cluster at equal fair-share positions; ``a-starve`` waits past the 2 s guard and
takes the first node that frees, which puts ``a`` above its share. Fair share then evicts one
of ``a``'s older jobs for ``b``'s waiting job — never ``a-starve``, which a server used to evict
at its next step (once its gang reported started) only for the guard to start it again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.test_passed_over_server import unconstrained
from tests.api.test_preemption_server import phase
from tests.api.test_server import wait_for
from tests.api.test_time_limits_server import server_with_policy

POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: starving-fair-share}
scheduling:
  idleAllocation: fair-share
  fairShare: {usageHalfLifeS: 0}
  starvationGuardS: 2
  preemption: {gracePeriodS: 1}
teams:
- name: a
  fairShareWeight: 1
  absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 64}}
- name: b
  fairShareWeight: 3
  absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 64}}
"""


def one_node(name: str, team: str) -> dict[str, Any]:
    body = unconstrained(name, 1)
    body["team"] = team
    return body


def preempted(admin: httpx.Client, job: str) -> bool:
    return any(
        change["phase"] == "preempting" for change in admin.get(f"/jobs/{job}").json()["history"]
    )


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "starving-fair-share", POLICY)


def test_the_guard_started_job_runs_on_and_an_older_job_of_its_team_yields(
    admin: httpx.Client,
) -> None:
    running = [("a-0", "a"), ("a-1", "a"), *((f"b-{n}", "b") for n in range(6))]
    for name, team in running:  # a: 16 of 64 GPUs / 1, b: 48 / 3: equal positions
        assert admin.post("/jobs", json=one_node(name, team)).status_code == 201
    for name, _ in running:
        assert wait_for(lambda n=name: phase(admin, n), lambda p: p == "running") == "running"
    assert admin.post("/jobs", json=one_node("a-starve", "a")).status_code == 201
    time.sleep(2.5)  # a-starve starves; b-next, submitted now, does not
    assert admin.post("/jobs", json=one_node("b-next", "b")).status_code == 201
    # b (40 / 64 / 3) stands before a (16 / 64 / 1) once b-0 ends, but the guard holds the
    # node that frees for a-starve
    assert admin.post("/jobs/b-0/cancel").status_code in (200, 202)
    started = wait_for(lambda: phase(admin, "a-starve"), lambda p: p == "running")
    assert started == "running", (
        admin.get("/jobs/a-starve/explain").json(),
        admin.get("/jobs/b-next").json()["phase"],
    )
    # a is above its share now: fair share evicts an older job of a's for b-next
    assert wait_for(lambda: phase(admin, "b-next"), lambda p: p == "running") == "running"
    assert preempted(admin, "a-0") or preempted(admin, "a-1")
    assert not preempted(admin, "a-starve")
    assert phase(admin, "a-starve") == "running"
