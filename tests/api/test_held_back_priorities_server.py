"""A job held back by its own team's quota hold fails for the team's jobs of its shape at
every priority (ADR 0007, "Held back at every priority"), through a real ``topoq server``
with the local executor: the team's later one-node jobs of three priorities all wait as the
first of them did (the stored wait is what ``topoq explain`` works out afresh), and once the
head starts they start in their turn — the highest priority first — as far as the team's
quota goes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.test_passed_over_server import (
    held_for_head_as_worked_out_afresh,
    stored_wait,
    unconstrained,
)
from tests.api.test_preemption_server import phase
from tests.api.test_server import wait_for
from tests.api.test_time_limits_server import server_with_policy

POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: held-back-priorities}
scheduling:
  priorityClasses:
  - {name: urgent, weight: 100}
  - {name: normal, weight: 10}
  - {name: batch, weight: 1}
  defaultPriorityClass: normal
teams:
- name: nlp
  borrowLimitPercent: 0
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""
LATER = [(f"nlp-{cls}-{n}", cls) for cls in ("batch", "normal", "urgent") for n in range(2)]
"""One-node jobs of one shape at three priorities, submitted lowest priority first."""


def with_priority(name: str, pods: int, priority: str) -> dict[str, Any]:
    body = unconstrained(name, pods)
    body["document"]["spec"]["priorityClassName"] = priority
    return body


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "held-back-priorities", POLICY)


def test_held_back_jobs_of_every_priority_wait_as_the_first_and_start_by_priority(
    admin: httpx.Client,
) -> None:
    made = admin.post("/jobs", json=with_priority("nlp-run", 2, "urgent"))
    assert made.status_code == 201, made.text
    assert wait_for(lambda: phase(admin, "nlp-run"), lambda p: p == "running") == "running"
    # 2 running + 3 is over nlp's 4 nodes and it may not borrow: the head waits, holding quota
    for name, pods, priority in (("nlp-head", 3, "urgent"), *((n, 1, c) for n, c in LATER)):
        made = admin.post("/jobs", json=with_priority(name, pods, priority))
        assert made.status_code == 201, made.text
    names = [name for name, _ in LATER]

    def all_held() -> bool:
        return all(
            stored_wait(admin, name).get("reason") == "RESERVED_FOR_LARGER_GANG" for name in names
        )

    assert wait_for(all_held, lambda held: held), [stored_wait(admin, n) for n in names]
    held_for_head_as_worked_out_afresh(admin, names)
    assert phase(admin, "nlp-head") == "pending"

    assert admin.post("/jobs/nlp-run/cancel").status_code in (200, 202)
    assert wait_for(lambda: phase(admin, "nlp-head"), lambda p: p == "running") == "running"
    first = "nlp-urgent-0"  # the highest priority, though submitted after the others
    assert wait_for(lambda: phase(admin, first), lambda p: p == "running") == "running"
    for name in names:
        if name != first:
            assert phase(admin, name) == "pending"
            waiting = stored_wait(admin, name)
            assert waiting["reason"] == "BORROW_LIMIT_REACHED", waiting
