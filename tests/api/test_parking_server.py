"""Parked waits through a real ``topoq server`` (ADR 0007): while a job keeps waiting for the
same reason the controller's cycles keep its diagnostic (``explain`` answers with it), and
``explain?fresh=true`` works its numbers out as they are now; the server goes on deciding for
everyone else meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import small_job
from tests.api.test_server import wait_for
from tests.api.test_starvation_server import phase
from tests.api.test_time_limits_server import server_with_policy

POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: parking}
teams:
- name: nlp
  borrowLimitPercent: 0
  quotas: [{flavor: ml.p5.48xlarge, instances: 2}]
- name: vision
  borrowLimitPercent: 100
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "parking", POLICY)


def sleeping(name: str, team: str) -> dict[str, object]:
    return small_job(name, pods=2, team=team)  # its pods sleep 60 s (server_with_policy)


def explained(admin: httpx.Client, job: str, **params: str) -> dict[str, Any]:
    answer = admin.get(f"/jobs/{job}/explain", params=params).json()
    assert isinstance(answer, dict)
    return answer


def test_a_parked_wait_keeps_its_numbers_and_explain_fresh_gives_them_as_now(
    admin: httpx.Client,
) -> None:
    assert admin.post("/jobs", json=sleeping("nlp-run", "nlp")).status_code == 201
    assert wait_for(lambda: phase(admin, "nlp-run"), lambda p: p == "running") == "running"
    assert admin.post("/jobs", json=sleeping("nlp-wait", "nlp")).status_code == 201
    before = wait_for(lambda: explained(admin, "nlp-wait"), lambda a: a.get("reason"))
    assert before["reason"] == "BORROW_LIMIT_REACHED"  # nlp may not borrow; its quota is in use
    assert explained(admin, "nlp-wait", fresh="true")["numbers"] == before["numbers"]

    made = admin.post("/jobs", json=sleeping("vision-run", "vision"))  # uses what nlp could lend
    assert made.status_code == 201, made.text
    assert wait_for(lambda: phase(admin, "vision-run"), lambda p: p == "running") == "running"
    kept = explained(admin, "nlp-wait")
    assert kept["reason"] == before["reason"]
    time.sleep(2)  # the controller's cycles go on (vision's pods report in): the same wait
    assert explained(admin, "nlp-wait") == kept
    now = explained(admin, "nlp-wait", fresh="true")
    assert now["reason"] == before["reason"]
    lent_away = before["numbers"]["free_to_lend"] - now["numbers"]["free_to_lend"]
    assert lent_away == 16, (before["numbers"], now["numbers"])  # vision's 2 nodes
    assert phase(admin, "nlp-wait") == "pending"
