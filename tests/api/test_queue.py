"""``GET /queue``: the waiting jobs in the order the next cycle would give them their turns, with
global positions, the jobs not in line after them, other teams' jobs lean; and ``GET /changes``:
a mark that moves with every write a view shows, and only then."""

from __future__ import annotations

from tests.api.conftest import OTHER_TEAM, TEAM, Api, small_job
from topoq.domain.job import JobPhase

V1 = "/api/v1"
BLOCK = "topology.k8s.aws/network-node-layer-3"


def full_cluster_with_a_queue(api: Api) -> None:
    """nlp and vision each run 4 of the 8 nodes; then n1, v1, n2 and n3 (held) wait."""
    member, outsider = api.headers("member"), api.headers("outsider")
    for half in ("a", "b"):  # a block holds 2 nodes
        api.client.post(f"{V1}/jobs", json=small_job(f"n-run-{half}"), headers=member)
        body = small_job(f"v-run-{half}", team=OTHER_TEAM)
        api.client.post(f"{V1}/jobs", json=body, headers=outsider)
    api.controller.step()
    assert api.store.count_jobs(phase=JobPhase.PENDING) == 0
    for name, team, headers in [
        ("n1", TEAM, member),
        ("v1", OTHER_TEAM, outsider),
        ("n2", TEAM, member),
        ("n3", TEAM, member),
    ]:
        body = small_job(name, pods=1, team=team)
        assert api.client.post(f"{V1}/jobs", json=body, headers=headers).status_code == 201
    assert api.client.post(f"{V1}/jobs/n3/hold", headers=member).status_code == 200
    api.controller.step()


def test_the_queue_is_in_turn_order_with_the_jobs_not_in_line_last(api: Api) -> None:
    full_cluster_with_a_queue(api)
    queue = api.client.get(f"{V1}/queue", headers=api.headers("member")).json()
    assert [(row["id"], row["position"]) for row in queue["items"]] == [
        ("n1", 1),
        ("v1", 2),
        ("n2", 3),
        ("n3", None),  # held: not in line
    ]
    assert queue["total"] == 4 and queue["inLine"] == 3
    n1, v1, _, n3 = queue["items"]
    assert n1["topology"] == f"required {BLOCK}" and n1["reason"] and n1["reasonMessage"]
    assert n1["remedies"], "a job of the caller's team says what would let it start"
    assert n3["held"] is True and n3["reason"] == "HELD"
    lean = {key for key, value in v1.items() if value is not None}
    assert lean == {"id", "team", "phase", "gpus", "visible", "position"}  # another team's


def test_a_team_s_page_keeps_the_positions_in_the_whole_queue(api: Api) -> None:
    full_cluster_with_a_queue(api)
    page = api.client.get(
        f"{V1}/queue", params={"team": TEAM, "limit": 2, "offset": 1}, headers=api.headers("viewer")
    ).json()
    assert [(row["id"], row["position"]) for row in page["items"]] == [("n2", 3), ("n3", None)]
    assert page["total"] == 3 and page["inLine"] == 2


def test_a_bad_page_is_refused_with_what_to_fix(api: Api) -> None:
    answer = api.client.get(f"{V1}/queue", params={"limit": 0}, headers=api.headers("viewer"))
    assert answer.status_code == 422 and "limit" in answer.text
    assert api.client.get(f"{V1}/queue").status_code == 401  # a token is needed


def test_the_change_mark_moves_with_every_write_a_view_shows_and_only_then(api: Api) -> None:
    viewer = api.headers("viewer")

    def mark() -> str:
        answer = api.client.get(f"{V1}/changes", headers=viewer)
        assert answer.status_code == 200
        return str(answer.json()["mark"])

    before = mark()
    assert mark() == before  # nothing written
    api.controller.step()
    assert mark() == before  # a cycle that decided nothing
    api.client.post(f"{V1}/jobs", json=small_job("n1", pods=1), headers=api.headers("member"))
    submitted = mark()
    assert submitted != before
    api.controller.step()  # admits it
    admitted = mark()
    assert admitted != submitted
    node = api.client.get(f"{V1}/nodes", headers=viewer).json()[0]["name"]
    api.client.post(f"{V1}/nodes/{node}/cordon", headers=api.headers("admin"))
    assert mark() != admitted
