"""``queueOrder: shortest-first`` through a real ``topoq server`` (SQLite, the local executor,
pods that sleep 60 s): among jobs of one priority the shortest time limit goes first — its own
limit, else its class's — and jobs without one go last; the queue shows that order and the
capacity that frees goes to the shortest job, not the first submitted."""

from __future__ import annotations

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
metadata: {name: shortest-first}
scheduling:
  queueOrder: shortest-first
  priorityClasses:
  - {name: normal, weight: 10}
  - {name: quick, weight: 10, timeLimit: 10m}
  defaultPriorityClass: normal
teams:
- name: nlp
  borrowLimitPercent: 0
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""


def limited(name: str, limit_s: float | None, priority: str = "normal") -> dict[str, Any]:
    body = unconstrained(name, 4)  # the team's whole quota: one runs at a time
    body["document"]["spec"]["priorityClassName"] = priority
    if limit_s is not None:
        body["time_limit_s"] = limit_s
    return body


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "shortest-first", POLICY)


def test_the_shortest_time_limit_goes_first_and_jobs_without_one_last(
    admin: httpx.Client,
) -> None:
    assert admin.post("/jobs", json=limited("nlp-run", None)).status_code == 201
    assert wait_for(lambda: phase(admin, "nlp-run"), lambda p: p == "running") == "running"
    for body in (
        limited("nlp-day", 86400),
        limited("nlp-unlimited", None),
        limited("nlp-class", None, priority="quick"),  # its class's 10 minutes
        limited("nlp-minute", 60),
    ):
        made = admin.post("/jobs", json=body)
        assert made.status_code == 201, made.text
    expected = ["nlp-minute", "nlp-class", "nlp-day", "nlp-unlimited"]

    def in_line() -> list[str]:
        return [row["id"] for row in admin.get("/queue").json()["items"]]

    assert wait_for(in_line, lambda order: order == expected) == expected
    kept = admin.get("/policy").json()["document"]["scheduling"]
    assert kept["queueOrder"] == "shortest-first"  # as the server keeps and shows it

    assert admin.post("/jobs/nlp-run/cancel").status_code in (200, 202)
    assert wait_for(lambda: phase(admin, "nlp-minute"), lambda p: p == "running") == "running"
    assert [phase(admin, name) for name in expected[1:]] == ["pending"] * 3
    assert admin.post("/jobs/nlp-minute/cancel").status_code in (200, 202)
    assert wait_for(lambda: phase(admin, "nlp-class"), lambda p: p == "running") == "running"
    assert [phase(admin, name) for name in expected[2:]] == ["pending"] * 2
