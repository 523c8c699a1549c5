"""No token reads another team's data beyond the aggregate view (docs/api.md, "What a token
sees of other teams"): each team's jobs carry distinctive markers — their user's name, pod-set
names, commands, arguments, environment values, history causes, explanations, logs — and
every route of the app is called by every role of the other team, with every job, token and
filter it could name. Not one marker of a team may reach a token that does not act for it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import OTHER_TEAM, TEAM, Api, make_api
from tests.api.test_roles import ROUTES, V1
from topoq.engine.metrics import ControlPlaneMetrics
from topoq.engine.ports import ExecutorEventKind, JobLog, LogRequest, PodLog
from topoq.store.sql_store import SqlStore
from topoq.wire.v1 import Role

MARKERS = {TEAM: "nsecret", OTHER_TEAM: "vsecret"}
"""Every value a team's jobs carry contains its marker (in any case); job ids do not, since
ids are part of the aggregate view."""
JOBS = ("running", "waiting", "cancelled")
AGGREGATE_FIELDS = {"id", "team", "phase", "gpus", "visible", "position"}
"""A position is in the queue's rows only: its place in the queue every team shares."""
NODE = "p5-0001"
MUTATING = {"POST", "PUT", "DELETE", "PATCH"}


@dataclass(frozen=True)
class Caller:
    token: str
    """A key of ``Api.tokens``."""
    teams: frozenset[str]

    def foreign_markers(self) -> list[str]:
        return [marker for team, marker in MARKERS.items() if team not in self.teams]


CALLERS = [
    Caller("team-admin", frozenset({TEAM})),
    Caller("member", frozenset({TEAM})),
    Caller("viewer", frozenset({TEAM})),
    Caller("nsecret-user", frozenset({TEAM})),
    Caller("outsider", frozenset({OTHER_TEAM})),
    Caller("vsecret-user", frozenset({OTHER_TEAM})),
]


def job_id(team: str, kind: str) -> str:
    return f"{team}-{kind}"


def marked_job(team: str, kind: str) -> dict[str, object]:
    marker = MARKERS[team]
    # 7 whole nodes are more than a team's 32 GPUs guaranteed plus 16 borrowable: it waits
    pods = 7 if kind == "waiting" else 2
    layer_3 = {"required": "topology.k8s.aws/network-node-layer-3"}
    return {
        "format": "topoq",
        "team": team,
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": job_id(team, kind)},
            "spec": {
                "podSets": [
                    {
                        "name": f"{marker}-podset",
                        "count": pods,
                        "requests": {"nvidia.com/gpu": 8},
                        "topology": {} if kind == "waiting" else layer_3,
                        "command": [f"/opt/{marker}-cmd"],
                        "args": [f"--{marker}-arg"],
                        "environment": {f"{marker.upper()}_VAR": f"{marker}-env-value"},
                    }
                ]
            },
        },
    }


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """Both teams with a running, a waiting and a cancelled job, submitted and cancelled by a
    member token named after the team's marker; logs that name the marker; live metrics."""
    for api in make_api(tmp_path_factory.mktemp("isolation")):
        metrics = ControlPlaneMetrics()
        api.controller.metrics = metrics
        api.service.metrics = metrics
        api.service.logs = _MarkedLogs(api.store)
        for team, marker in MARKERS.items():
            api.tokens[f"{marker}-user"] = api.store.create_token(
                f"{marker}-user", Role.MEMBER.value, [team]
            )[0]
        for team, marker in MARKERS.items():
            headers = api.headers(f"{marker}-user")
            for kind in JOBS:
                made = api.client.post(f"{V1}/jobs", json=marked_job(team, kind), headers=headers)
                assert made.status_code == 201, made.text
            cancel = api.client.post(
                f"{V1}/jobs/{job_id(team, 'cancelled')}/cancel", headers=headers
            )
            assert cancel.status_code == 200, cancel.text
        api.controller.step()
        for team in MARKERS:
            api.executor.report(ExecutorEventKind.STARTED, job_id(team, "running"))
        api.controller.step()
        yield api


@dataclass(frozen=True)
class _MarkedLogs:
    """A log reader whose every line names the job's team's marker."""

    store: SqlStore

    def __call__(self, request: LogRequest) -> JobLog:
        text = f"{MARKERS[self.store.job(request.job).team]}-log-line: step 10 loss 1.5\n"
        size = len(text.encode())
        pod = PodLog(request.pod or 0, "w", "node", text, 0, size, size, truncated=False)
        return JobLog(request.job, 1, request.pod, pods=(pod,))


def test_the_seed_is_there_for_those_who_may_see_it(seeded: Api) -> None:
    """Not a vacuous test: the admin, and each team's own tokens, do see the markers."""
    admin = seeded.headers("admin")
    for team, marker in MARKERS.items():
        running = seeded.client.get(f"{V1}/jobs/{job_id(team, 'running')}", headers=admin)
        assert running.json()["phase"] == "running", running.text
        for value in ("-podset", "-user"):  # commands and environment are never shown
            assert f"{marker}{value}" in running.text
        history = seeded.client.get(f"{V1}/jobs/{job_id(team, 'cancelled')}/history", headers=admin)
        assert f"{marker}-user" in history.text
        own = seeded.headers(f"{marker}-user")
        logs = seeded.client.get(f"{V1}/jobs/{job_id(team, 'running')}/logs", headers=own)
        assert f"{marker}-log-line" in logs.text
    audit = seeded.client.get(f"{V1}/audit", headers=admin).text
    assert all(f"{marker}-user" in audit for marker in MARKERS.values())


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("caller", CALLERS, ids=lambda caller: caller.token)
def test_no_route_shows_a_token_anything_of_another_team(
    seeded: Api, method: str, path: str, caller: Caller
) -> None:
    for url, params, body in _calls(seeded, method, path, caller):
        response = seeded.client.request(
            method, url, params=params, json=body, headers=seeded.headers(caller.token)
        )
        assert response.status_code < 500, (method, url, params, response.text)
        text = response.text.lower()
        leaked = [marker for marker in caller.foreign_markers() if marker in text]
        assert not leaked, (method, url, params, response.text[:2000])
        if response.status_code == 200 and "items" in (payload := _json(response)):
            _only_aggregates_of_other_teams(payload["items"], caller)


def _only_aggregates_of_other_teams(rows: list[dict[str, Any]], caller: Caller) -> None:
    for row in rows:
        if row["team"] in caller.teams:
            assert row["visible"] is True
            continue
        shown = {key for key, value in row.items() if value not in (None, False)}
        assert shown <= AGGREGATE_FIELDS, row


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}


def _calls(
    api: Api, method: str, path: str, caller: Caller
) -> Iterator[tuple[str, dict[str, object], object]]:
    """Every call of the route the caller could make: each job and token it could name (of
    other teams only, for a change: its own would change the seed), each filter."""
    foreign = [team for team in MARKERS if team not in caller.teams]
    teams = [*MARKERS] if method not in MUTATING else foreign
    job_ids = [job_id(team, kind) for team in teams for kind in JOBS]
    token_ids = [
        record.id
        for record in api.store.tokens(include_revoked=True)
        if method not in MUTATING or not set(record.teams) & caller.teams
    ]
    for job in job_ids if "{job_id}" in path else [None]:
        for token in token_ids if "{token_id}" in path else [None]:
            url = path.format(job_id=job, token_id=token, name=NODE, version=1, asset="x.css")
            for params in _query_variants(method, path):
                yield url, params, _body(method, path, foreign)


def _query_variants(method: str, path: str) -> list[dict[str, object]]:
    users = [f"{marker}-user" for marker in MARKERS.values()]
    teams = [*MARKERS]
    variants: dict[str, list[dict[str, object]]] = {
        f"{V1}/jobs": [
            {},
            {"phase": "pending"},
            *({"team": team} for team in teams),
            *({"user": user} for user in users),
            *({"user": user, "team": team} for user in users for team in teams),
        ],
        f"{V1}/events": [{}, *({"team": team} for team in teams)],
        f"{V1}/reports/usage": [{}, *({"team": team} for team in teams)],
        f"{V1}/tokens": [{}, {"include_revoked": "true"}],
        f"{V1}/jobs/{{job_id}}/logs": [{}, {"pod": 0}],
    }
    return variants.get(path, [{}]) if method == "GET" else [{}]


def _body(method: str, path: str, foreign: list[str]) -> object:
    """A change aimed at another team (refused, and the refusal must not tell about it)."""
    if (method, path) == ("POST", f"{V1}/jobs"):
        body = marked_job(foreign[0], "probe")
        return body | {"document": {**body["document"], "metadata": {"name": "probe"}}}  # type: ignore[dict-item]  # a dict built above
    if (method, path) == ("POST", f"{V1}/tokens"):
        return {"name": "probe", "role": "member", "teams": foreign}
    if (method, path) == ("PUT", f"{V1}/policy"):
        return {"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": []}
    return None


def test_the_seed_keeps_its_shape(seeded: Api) -> None:
    """The calls above change nothing of the seed: each team's jobs are where they were."""
    phases = {
        view.id: view.phase.value for view in seeded.store.jobs(include_finished=True).values()
    }
    for team in MARKERS:
        assert phases[job_id(team, "running")] == "running"
        assert phases[job_id(team, "waiting")] == "pending"
        assert phases[job_id(team, "cancelled")] == "cancelled"


def test_the_open_metrics_say_nothing_finer_than_a_team(seeded: Api) -> None:
    """``/metrics`` needs no token, so its labels are teams, phases and kinds, never a job,
    a user or a node (docs/api.md, "Routes without a token")."""
    text = seeded.client.get("/metrics").text
    labels = {
        name
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        for name in sample.labels
    }
    assert "topoq_jobs" in text and "team" in labels
    known = {"team", "phase", "state", "kind", "cause", "level", "le", "decided_by"}
    assert labels <= known, labels
