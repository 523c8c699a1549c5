"""Kept policy versions read one by one, a rollback as a new audited version, and the audit
log filtered by time and actor — through the API over a real store."""

from __future__ import annotations

import copy
from typing import Any

from tests.api.conftest import Api

V1 = "/api/v1"


def current(api: Api) -> dict[str, Any]:
    found: dict[str, Any] = api.client.get(f"{V1}/policy", headers=api.headers("viewer")).json()
    return found


def put_policy(api: Api, document: dict[str, Any]) -> int:
    response = api.client.put(f"{V1}/policy", json=document, headers=api.headers("admin"))
    assert response.status_code == 200, response.text
    version: int = response.json()["version"]
    return version


def reweighted(document: dict[str, Any], weight: int) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    changed["teams"][0]["fairShareWeight"] = weight
    return changed


def test_a_kept_version_reads_back_and_a_rollback_restores_it_as_a_new_version(api: Api) -> None:
    first = current(api)
    second = put_policy(api, reweighted(first["document"], 7))
    assert second == first["version"] + 1
    kept = api.client.get(f"{V1}/policy/versions/{first['version']}", headers=api.headers("member"))
    assert kept.status_code == 200 and kept.json() == first
    assert current(api)["document"] != first["document"]

    rolled = api.client.post(
        f"{V1}/policy/versions/{first['version']}/rollback", headers=api.headers("admin")
    )
    assert rolled.status_code == 200, rolled.text
    assert rolled.json() == {"version": second + 1, "document": first["document"]}
    assert current(api) == rolled.json()
    assert api.store.policy() == api.store.policy_at(first["version"])  # what the cycle reads
    entry = api.client.get(f"{V1}/audit", headers=api.headers("admin")).json()[0]
    assert entry["action"] == "policy" and entry["target"] == f"version {second + 1}"
    assert entry["detail"] == {"rollbackOf": first["version"]}


def test_a_rollback_is_for_admins_and_to_a_version_that_was_kept(api: Api) -> None:
    version = current(api)["version"]
    for who in ("team-admin", "member", "viewer"):
        refused = api.client.post(
            f"{V1}/policy/versions/{version}/rollback", headers=api.headers(who)
        )
        assert refused.status_code == 403, (who, refused.text)
    for missing in (version + 1, 0, 10**6, 2**63, 10**30):  # past what a database holds too
        for method, path in (("GET", ""), ("POST", "/rollback")):
            answer = api.client.request(
                method, f"{V1}/policy/versions/{missing}{path}", headers=api.headers("admin")
            )
            assert answer.status_code == 404, (missing, answer.text)
            assert f"no policy version {missing}" in answer.json()["detail"]["message"]
            assert f"1 to {version}" in answer.json()["detail"]["hint"]
    assert current(api)["version"] == version  # nothing was made


def test_the_audit_log_filters_by_time_and_by_actor(api: Api) -> None:
    admin = api.headers("admin")
    for who, name in (("admin", "first"), ("team-admin", "second")):
        body = {"name": name, "role": "viewer", "teams": ["nlp"]}
        created = api.client.post(f"{V1}/tokens", json=body, headers=api.headers(who))
        assert created.status_code == 201, created.text
    everything = api.client.get(f"{V1}/audit", headers=admin).json()
    team_admin = everything[0]["actor"]
    assert everything[0]["target"] == "second" and team_admin != "admin"
    for actor in ("admin", team_admin):
        found = api.client.get(f"{V1}/audit", params={"actor": actor}, headers=admin).json()
        assert found and found == [e for e in everything if e["actor"] == actor]
    newest, before = everything[0]["at"], everything[1]["at"]
    assert before < newest  # the tests' clock ticks a second a call
    api.service.clock = lambda: newest + 0.25
    recent = api.client.get(f"{V1}/audit", params={"since_s": 0.5}, headers=admin).json()
    assert [e["target"] for e in recent] == ["second"]
    since_before = newest + 0.25 - before
    both = api.client.get(f"{V1}/audit", params={"since_s": since_before}, headers=admin).json()
    assert both == everything[:2]
    nobody = api.client.get(f"{V1}/audit", params={"actor": "nobody"}, headers=admin).json()
    assert nobody == []
    for bad_since in (0, "inf", "nan"):
        bad = api.client.get(f"{V1}/audit", params={"since_s": bad_since}, headers=admin)
        assert bad.status_code == 422, bad_since
    assert api.client.get(f"{V1}/audit", headers=api.headers("member")).status_code == 403


def test_a_policy_linted_without_keeping_it_says_what_put_would(api: Api) -> None:
    before = current(api)
    versions = api.client.get(f"{V1}/policy/versions", headers=api.headers("admin")).json()
    lint = f"{V1}/policy/lint"
    fine = api.client.post(lint, json=before["document"], headers=api.headers("admin"))
    assert fine.status_code == 200, fine.text
    assert fine.json()["accepted"] is True
    too_big = copy.deepcopy(before["document"])
    too_big["teams"][0]["quotas"][0]["instances"] = 100_000  # far over the cluster
    refused = api.client.post(lint, json=too_big, headers=api.headers("admin"))
    assert refused.status_code == 200, refused.text
    answer = refused.json()
    assert answer["accepted"] is False and answer["findings"][0]["severity"] == "error"
    put = api.client.put(f"{V1}/policy", json=too_big, headers=api.headers("admin"))
    assert put.status_code == 422  # what the lint said: refused
    assert answer["findings"][0]["code"] in put.json()["detail"]["message"]
    broken = api.client.post(lint, json={"kind": "Policy"}, headers=api.headers("admin"))
    assert broken.status_code == 422 and broken.json()["detail"]["where"].startswith("body")
    member = api.client.post(lint, json=before["document"], headers=api.headers("member"))
    assert member.status_code == 403
    after = api.client.get(f"{V1}/policy/versions", headers=api.headers("admin")).json()
    assert after == versions and current(api) == before  # nothing kept
