"""Jobs whose class already failed in a cycle are passed over in the pending order (ADR 0007),
through a real ``topoq server`` with the local executor: the later jobs of a team whose queue
head holds the team's quota, all of one class, each wait as the first of them did — the stored
wait that ``topoq list`` shows is what ``topoq explain`` works out afresh — and once the head
starts, the first of them is admitted in its turn and the others wait for the quota it took."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import small_job
from tests.api.test_preemption_server import phase
from tests.api.test_server import wait_for
from tests.api.test_time_limits_server import server_with_policy

POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: passed-over}
teams:
- name: nlp
  borrowLimitPercent: 0
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""
LATER = [f"nlp-small-{n}" for n in range(4)]
"""Of one class: the first is tried, the others are passed over (the team's queue goes on
after them with ``nlp-pair``, of another class, so it does not settle at once)."""


def unconstrained(name: str, pods: int) -> dict[str, Any]:
    body = small_job(name, pods=pods, team="nlp")
    del body["document"]["spec"]["podSets"][0]["topology"]  # type: ignore[index]
    return body


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    yield from server_with_policy(tmp_path_factory, "passed-over", POLICY)


def stored_wait(admin: httpx.Client, job: str) -> dict[str, Any]:
    return dict(admin.get(f"/jobs/{job}/explain").json())


def run_unconstrained(admin: httpx.Client, name: str, pods: int) -> None:
    """Submit a job of team nlp that may go anywhere, and wait until it runs."""
    made = admin.post("/jobs", json=unconstrained(name, pods))
    assert made.status_code == 201, made.text
    assert wait_for(lambda: phase(admin, name), lambda p: p == "running") == "running"


def test_the_later_jobs_of_a_held_back_class_wait_as_the_first_and_start_in_their_turn(
    admin: httpx.Client,
) -> None:
    run_unconstrained(admin, "nlp-run", 2)
    # 2 running + 3 is over nlp's 4 nodes and it may not borrow: the head waits, holding quota
    for name, pods in (("nlp-head", 3), *((name, 1) for name in LATER), ("nlp-pair", 2)):
        made = admin.post("/jobs", json=unconstrained(name, pods))
        assert made.status_code == 201, made.text

    def all_held() -> bool:
        return all(
            stored_wait(admin, name).get("reason") == "RESERVED_FOR_LARGER_GANG"
            for name in [*LATER, "nlp-pair"]
        )

    assert wait_for(all_held, lambda held: held), [stored_wait(admin, n) for n in LATER]
    held_for_head_as_worked_out_afresh(admin, [*LATER, "nlp-pair"])
    assert phase(admin, "nlp-head") == "pending"

    assert admin.post("/jobs/nlp-run/cancel").status_code in (200, 202)
    assert wait_for(lambda: phase(admin, "nlp-head"), lambda p: p == "running") == "running"
    first = LATER[0]  # the first submitted of the class: 3 + 1 fills nlp's 4 nodes
    assert wait_for(lambda: phase(admin, first), lambda p: p == "running") == "running"
    for name in [*LATER[1:], "nlp-pair"]:
        assert phase(admin, name) == "pending"
        waiting = stored_wait(admin, name)
        assert waiting["reason"] == "BORROW_LIMIT_REACHED", waiting


def held_for_head_as_worked_out_afresh(admin: httpx.Client, names: list[str]) -> None:
    """Each of ``names`` waits for the quota team nlp holds for ``nlp-head``, and its stored
    wait is what ``topoq explain`` works out afresh."""
    for name in names:
        stored = stored_wait(admin, name)
        assert stored["numbers"]["held_for"] == "nlp-head", stored
        assert "team nlp holds quota for nlp-head" in stored["message"], stored
        fresh = admin.get(f"/jobs/{name}/explain", params={"fresh": "true"}).json()
        assert (fresh["reason"], fresh["message"], fresh["numbers"]) == (
            stored["reason"],
            stored["message"],
            stored["numbers"],
        )
