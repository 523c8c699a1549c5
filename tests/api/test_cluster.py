"""Cluster routes in-process: policy versions, nodes, topology occupancy, teams, tokens."""

from __future__ import annotations

from typing import Any

import yaml

from tests.api.conftest import POLICY_FILE, TEAM, Api, small_job
from topoq.engine.ports import ExecutorEventKind

V1 = "/api/v1"


def policy_body() -> dict[str, Any]:
    document = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_every_policy_version_is_kept_with_its_actor(api: Api) -> None:
    admin = api.headers("admin")
    body = policy_body()
    body["teams"][0]["fairShareWeight"] = 7
    response = api.client.put(f"{V1}/policy", json=body, headers=admin)
    assert response.status_code == 200 and response.json()["version"] == 2
    current = api.client.get(f"{V1}/policy", headers=api.headers("viewer")).json()
    assert current["version"] == 2 and current["document"]["teams"][0]["fairShareWeight"] == 7
    versions = api.client.get(f"{V1}/policy/versions", headers=admin).json()
    assert [(v["version"], v["actor"]) for v in versions] == [(1, "test"), (2, "admin")]
    assert api.client.get(f"{V1}/audit", headers=admin).json()[0]["action"] == "policy"


def test_a_bad_policy_is_a_422_naming_the_field(api: Api) -> None:
    body = policy_body()
    body["teams"][1]["sharing"] = "Hoard"
    response = api.client.put(f"{V1}/policy", json=body, headers=api.headers("admin"))
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail["where"] == "body.teams[1].sharing"
    assert "LendAndBorrow" in detail["hint"]


def test_cordon_and_uncordon_a_node(api: Api) -> None:
    admin = api.headers("admin")
    cordoned = api.client.post(f"{V1}/nodes/p5-0001/cordon", headers=admin).json()
    assert cordoned["node"]["cordoned"] is True
    nodes = {n["name"]: n for n in api.client.get(f"{V1}/nodes", headers=admin).json()}
    assert nodes["p5-0001"]["cordoned"] and not nodes["p5-0002"]["cordoned"]
    topology = api.client.get(f"{V1}/topology", headers=admin).json()
    assert (topology["gpus"], topology["gpusFree"]) == (64, 56)
    uncordoned = api.client.post(f"{V1}/nodes/p5-0001/uncordon", headers=admin).json()
    assert uncordoned["node"]["cordoned"] is False
    missing = api.client.post(f"{V1}/nodes/p5-9999/cordon", headers=admin)
    assert missing.status_code == 404 and "p5-9999" in missing.json()["detail"]["message"]


def _running(api: Api, name: str) -> list[str]:
    api.client.post(f"{V1}/jobs", json=small_job(name), headers=api.headers("member"))
    api.controller.step()
    api.executor.report(ExecutorEventKind.STARTED, name)
    api.controller.step()
    job = api.client.get(f"{V1}/jobs/{name}", headers=api.headers("admin")).json()
    assert job["phase"] == "running"
    return list(job["allocation"]["nodes"])


def test_drain_cordons_the_node_and_requeues_its_gangs(api: Api) -> None:
    first, _ = _running(api, "r")
    admin = api.headers("admin")
    drained = api.client.post(f"{V1}/nodes/{first}/drain", headers=admin).json()
    assert drained["requeued"] == ["r"] and drained["node"]["cordoned"]
    job = api.client.get(f"{V1}/jobs/r", headers=admin).json()
    assert job["phase"] == "pending" and "drained" in job["history"][-1]["cause"]
    assert api.executor.cancelled == []  # the API writes the store; the controller acts
    api.controller.step()
    assert api.executor.cancelled == ["r"]
    again = api.client.get(f"{V1}/jobs/r", headers=admin).json()
    assert again["phase"] == "admitted" and first not in again["allocation"]["nodes"]


def test_a_failed_node_sends_its_gang_elsewhere_and_recovers(api: Api) -> None:
    first, _ = _running(api, "r")
    admin = api.headers("admin")
    failed = api.client.post(f"{V1}/nodes/{first}/fail", headers=admin).json()
    assert failed["node"]["ready"] is False
    api.controller.step()
    assert api.executor.failed_nodes == [first]
    api.controller.step()
    job = api.client.get(f"{V1}/jobs/r", headers=admin).json()
    assert job["phase"] == "admitted" and first not in job["allocation"]["nodes"]
    recovered = api.client.post(f"{V1}/nodes/{first}/recover", headers=admin).json()
    assert recovered["node"]["ready"] is True


def test_topology_and_teams_show_what_a_running_gang_uses(api: Api) -> None:
    _running(api, "r")
    viewer = api.headers("viewer")
    topology = api.client.get(f"{V1}/topology", headers=viewer).json()
    assert (topology["gpus"], topology["gpusUsed"], topology["gpusFree"]) == (64, 16, 48)
    [spine] = topology["domains"]
    blocks = [block for layer2 in spine["children"] for block in layer2["children"]]
    assert sorted(block["gpusUsed"] for block in blocks) == [0, 0, 0, 16]
    assert all(len(block["children"]) == 2 for block in blocks)
    teams = {t["name"]: t for t in api.client.get(f"{V1}/teams", headers=viewer).json()}
    [flavor] = teams[TEAM]["flavors"]
    assert (flavor["guaranteeGpus"], flavor["usedGpus"], flavor["borrowedGpus"]) == (32, 16, 0)
    assert teams[TEAM]["jobs"] == {"running": 1}


def test_a_team_admin_issues_member_tokens_for_its_own_teams_only(api: Api) -> None:
    team_admin = api.headers("team-admin")
    made = api.client.post(
        f"{V1}/tokens",
        json={"name": "carol", "role": "member", "teams": [TEAM]},
        headers=team_admin,
    )
    assert made.status_code == 201
    token = made.json()["token"]
    me = api.client.get(f"{V1}/whoami", headers={"Authorization": f"Bearer {token}"}).json()
    assert me == {"name": "carol", "role": "member", "teams": [TEAM]}
    for body, where in (
        ({"name": "x", "role": "admin", "teams": []}, "role"),
        ({"name": "x", "role": "member", "teams": ["vision"]}, "teams"),
    ):
        refused = api.client.post(f"{V1}/tokens", json=body, headers=team_admin)
        assert refused.status_code == 403 and refused.json()["detail"]["where"] == where
    listed = api.client.get(f"{V1}/tokens", headers=team_admin).json()
    carol = next(t for t in listed if t["name"] == "carol")
    assert {t["role"] for t in listed} <= {"member", "viewer"}
    revoked = api.client.post(f"{V1}/tokens/{carol['id']}/revoke", headers=team_admin)
    assert revoked.status_code == 200 and revoked.json()["revokedAt"] is not None
    after = api.client.get(f"{V1}/whoami", headers={"Authorization": f"Bearer {token}"})
    assert after.status_code == 401


def test_a_token_needs_a_team_unless_it_is_an_admins(api: Api) -> None:
    body = {"name": "nobody", "role": "viewer", "teams": []}
    response = api.client.post(f"{V1}/tokens", json=body, headers=api.headers("admin"))
    assert response.status_code == 422 and response.json()["detail"]["where"] == "teams"
