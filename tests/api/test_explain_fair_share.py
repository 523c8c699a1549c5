"""``explain`` under fair share: every team that borrows or has usage, and the job's own team,
with its borrowed share now, decayed usage, weight and position, lowest position first; and
each team's decayed usage and position in ``/teams``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.api.conftest import OTHER_TEAM, TEAM, Api, small_job, waits_forever
from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import IdleAllocation, TeamName
from topoq.testing.governance import policy, team

V1 = "/api/v1"


def fair_share(api: Api, *, idle: IdleAllocation = IdleAllocation.FAIR_SHARE) -> None:
    mine = team(TEAM, 16, borrow_gpus=48, weight=2)
    teams = (mine, team(OTHER_TEAM, 16, borrow_gpus=48, weight=0))
    rules = replace(policy(*teams), idle_allocation=idle)
    api.store.save_policy(rules, actor="test", now=0)
    api.store.save_fair_share_usage({TeamName(OTHER_TEAM): TeamUsage(0.5, 1_000_000.0)})


def test_a_waiting_job_is_explained_with_each_team_s_fair_share_standing(api: Api) -> None:
    fair_share(api)
    viewer = api.headers("viewer")
    for name in ("run-1", "run-2"):
        api.client.post(f"{V1}/jobs", json=small_job(name), headers=api.headers("member"))
    api.controller.step()  # nlp runs 4 of the 8 nodes: 2 above its guarantee of 2
    api.client.post(f"{V1}/jobs", json=waits_forever("wide"), headers=api.headers("member"))
    for _ in range(2):  # computed by a read-only cycle, then as the controller stored it
        explained = api.client.get(f"{V1}/jobs/wide/explain", headers=viewer).json()
        rows = explained["fairShare"]
        assert [row["team"] for row in rows] == [TEAM, OTHER_TEAM]
        mine, theirs = rows
        assert mine["weight"] == 2 and mine["borrowedShare"] == 0.25 and mine["usage"] > 0
        assert mine["position"] == pytest.approx((0.25 + mine["usage"]) / 2)
        assert theirs["weight"] == 0 and theirs["borrowedShare"] == 0
        assert theirs["usage"] == pytest.approx(0.5, rel=1e-3)
        assert theirs["position"] is None  # weight 0 with usage: last of all
        api.controller.step()


def test_without_fair_share_there_is_no_fair_share_section(api: Api) -> None:
    fair_share(api, idle=IdleAllocation.FIRST_COME)
    api.client.post(f"{V1}/jobs", json=waits_forever("wide"), headers=api.headers("member"))
    explained = api.client.get(f"{V1}/jobs/wide/explain", headers=api.headers("viewer")).json()
    assert explained["fairShare"] == []


def test_teams_show_each_team_s_decayed_usage(api: Api) -> None:
    fair_share(api)
    for name in ("run-1", "run-2"):
        api.client.post(f"{V1}/jobs", json=small_job(name), headers=api.headers("member"))
    api.controller.step()
    teams = api.client.get(f"{V1}/teams", headers=api.headers("viewer")).json()
    usage = {row["name"]: row["fairShareUsage"] for row in teams}
    assert usage[OTHER_TEAM] == pytest.approx(0.5, rel=1e-3)  # stored, barely decayed
    assert 0 < usage[TEAM] < 0.001  # borrowing a quarter of the cluster for a few seconds
    position = {row["name"]: row["fairSharePosition"] for row in teams}
    assert position[TEAM] == pytest.approx((0.25 + usage[TEAM]) / 2)  # weight 2
    assert position[OTHER_TEAM] is None  # weight 0 with usage: served last
    fair_share(api, idle=IdleAllocation.FIRST_COME)
    teams = api.client.get(f"{V1}/teams", headers=api.headers("viewer")).json()
    assert {row["fairShareUsage"] for row in teams} == {0.0}  # first-come keeps no usage
    assert {row["fairSharePosition"] for row in teams} == {None}  # and no position


def test_the_job_s_own_team_is_listed_even_past_the_first_fifty(api: Api) -> None:
    others = [team(f"t{index:02}", 0, borrow_gpus=64) for index in range(60)]
    rules = policy(team(TEAM, 0, borrow_gpus=64), *others, fair_share=True)
    api.store.save_policy(rules, actor="test", now=0)
    api.store.save_fair_share_usage(
        {TeamName(f"t{index:02}"): TeamUsage(0.01, 1_000_000.0) for index in range(60)}
        | {TeamName(TEAM): TeamUsage(0.5, 1_000_000.0)}
    )
    api.client.post(f"{V1}/jobs", json=waits_forever("wide"), headers=api.headers("member"))
    rows = api.client.get(f"{V1}/jobs/wide/explain", headers=api.headers("viewer")).json()
    teams = [row["team"] for row in rows["fairShare"]]
    assert len(teams) == 50 and teams[-1] == TEAM and teams[:49] == [f"t{i:02}" for i in range(49)]
