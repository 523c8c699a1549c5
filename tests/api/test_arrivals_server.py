"""Jobs that arrive alike to a full team wait as the ones before them did, without a cycle
(``core.cycle.arrivals``, ADR 0007), through a real ``topoq server`` with the local executor:
each one's stored wait is what ``topoq explain`` works out afresh, the steps that took them are
counted as such in ``/metrics``, and when work ends they start in their turns."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_passed_over_server import run_unconstrained, stored_wait, unconstrained
from tests.api.test_preemption_server import phase
from tests.api.test_server import wait_for
from tests.api.test_time_limits_server import server_with_policy

POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: arrivals}
teams:
- name: nlp
  borrowLimitPercent: 0
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""
SWEEP = [f"nlp-sweep-{n}" for n in range(5)]
"""One-node jobs of one class, submitted one at a time to a team at its limit."""


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "arrivals", POLICY)


def listed_reason(admin: httpx.Client, job: str) -> str | None:
    """The job's reason as ``topoq list`` shows it: its stored wait only (``explain`` works one
    out when none is stored yet)."""
    rows = admin.get("/jobs", params={"phase": "pending"}).json()["items"]
    return next((row["reason"] for row in rows if row["id"] == job), None)


def steps_decided_by(admin: httpx.Client, how: str) -> float:
    """``topoq_steps_total{decided_by=how}`` from the server's ``/metrics``."""
    root = str(admin.base_url).rstrip("/").removesuffix("/api/v1")
    text = httpx.get(f"{root}/metrics", timeout=5).text
    pattern = rf'^topoq_steps_total\{{decided_by="{how}"\}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def steps_taken_by_arrivals(admin: httpx.Client) -> float:
    return steps_decided_by(admin, "arrivals")


def test_a_sweep_to_a_full_team_waits_as_a_cycle_says_and_starts_in_its_turns(
    admin: httpx.Client,
) -> None:
    run_unconstrained(admin, "nlp-run", 4)
    before = steps_taken_by_arrivals(admin)
    for name in SWEEP:  # one at a time: each step sees one new job
        made = admin.post("/jobs", json=unconstrained(name, 1))
        assert made.status_code == 201, made.text
        reason = wait_for(lambda n=name: listed_reason(admin, n), lambda r: r is not None)
        assert reason == "BORROW_LIMIT_REACHED", name
    for name in SWEEP:
        stored = stored_wait(admin, name)
        fresh = admin.get(f"/jobs/{name}/explain", params={"fresh": "true"}).json()
        assert (fresh["reason"], fresh["message"], fresh["numbers"]) == (
            stored["reason"],
            stored["message"],
            stored["numbers"],
        )
    taken = wait_for(lambda: steps_taken_by_arrivals(admin), lambda n: n > before)
    assert taken >= before + len(SWEEP) - 1  # each after the first took no cycle

    assert admin.post("/jobs/nlp-run/cancel").status_code in (200, 202)
    for name in SWEEP[:4]:  # the team's four nodes, in submission order
        assert wait_for(lambda n=name: phase(admin, n), lambda p: p == "running") == "running"
    assert phase(admin, SWEEP[4]) == "pending"
    assert stored_wait(admin, SWEEP[4])["reason"] == "BORROW_LIMIT_REACHED"


def test_with_the_queue_empty_a_job_ending_costs_no_cycle_and_frees_its_room(
    admin: httpx.Client,
) -> None:
    """After the sweep: with nothing waiting, a running job cancelled is a step that runs no
    cycle (``decided_by="nothing_waits"``), and a job submitted next starts on its room."""
    assert admin.post(f"/jobs/{SWEEP[4]}/cancel").status_code in (200, 202)
    wait_for(lambda: phase(admin, SWEEP[4]), lambda p: p == "cancelled")
    before = steps_decided_by(admin, "nothing_waits")
    assert admin.post(f"/jobs/{SWEEP[0]}/cancel").status_code in (200, 202)
    wait_for(lambda: phase(admin, SWEEP[0]), lambda p: p == "cancelled")
    skipped = wait_for(lambda: steps_decided_by(admin, "nothing_waits"), lambda n: n > before)
    assert skipped > before
    run_unconstrained(admin, "nlp-after", 1)  # the cycle runs again once a job waits
