"""Every route × every role: allowed or 403, never anything else about access. The route list
comes from the app (``app.routes``, hidden routes included), so a new route without a line in
ACCESS fails here (and in docs/api.md); a new route that answers without a token fails
``test_only_the_documented_routes_answer_without_a_token``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tests.api.conftest import CLUSTER_FILE, POLICY_FILE, TEAM, Api, small_job
from topoq.api.app import create_app
from topoq.api.service import Service
from topoq.discovery.clusterfile import cluster_document
from topoq.discovery.sources import load_cluster
from topoq.wire.v1 import Role

PUBLIC = frozenset({"anonymous", *Role})
EVERYONE = frozenset(Role)
WRITERS = frozenset({Role.ADMIN, Role.TEAM_ADMIN, Role.MEMBER})
ISSUERS = frozenset({Role.ADMIN, Role.TEAM_ADMIN})
ADMIN = frozenset({Role.ADMIN})
V1 = "/api/v1"

OPEN_ROUTES = frozenset(
    {
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/docs/assets/{asset}",
        "/",
        "/ui/{name}",
    }
)
"""The routes that answer without a token (docs/api.md, "Routes without a token"): liveness,
Prometheus metrics (per team at most), the API's own documentation, and the dashboard's page
and files (which hold no data: the page asks the API with the token signed in with)."""

ACCESS: dict[tuple[str, str], frozenset[str]] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/docs/assets/{asset}"): PUBLIC,
    ("GET", "/"): PUBLIC,
    ("GET", "/ui/{name}"): PUBLIC,
    ("POST", f"{V1}/jobs"): WRITERS,
    ("GET", f"{V1}/jobs"): EVERYONE,
    ("GET", f"{V1}/jobs/{{job_id}}"): EVERYONE,
    ("POST", f"{V1}/jobs/{{job_id}}/cancel"): WRITERS,
    ("POST", f"{V1}/jobs/{{job_id}}/hold"): WRITERS,
    ("POST", f"{V1}/jobs/{{job_id}}/release"): WRITERS,
    ("GET", f"{V1}/jobs/{{job_id}}/explain"): EVERYONE,
    ("GET", f"{V1}/jobs/{{job_id}}/history"): EVERYONE,
    ("GET", f"{V1}/jobs/{{job_id}}/logs"): EVERYONE,
    ("GET", f"{V1}/teams"): EVERYONE,
    ("GET", f"{V1}/policy"): EVERYONE,
    ("PUT", f"{V1}/policy"): ADMIN,
    ("POST", f"{V1}/policy/lint"): ADMIN,
    ("GET", f"{V1}/policy/versions"): EVERYONE,
    ("GET", f"{V1}/policy/versions/{{version}}"): EVERYONE,
    ("POST", f"{V1}/policy/versions/{{version}}/rollback"): ADMIN,
    ("GET", f"{V1}/nodes"): EVERYONE,
    ("POST", f"{V1}/nodes/{{name}}/cordon"): ADMIN,
    ("POST", f"{V1}/nodes/{{name}}/uncordon"): ADMIN,
    ("POST", f"{V1}/nodes/{{name}}/drain"): ADMIN,
    ("POST", f"{V1}/nodes/{{name}}/fail"): ADMIN,
    ("POST", f"{V1}/nodes/{{name}}/recover"): ADMIN,
    ("POST", f"{V1}/cluster/apply"): ADMIN,
    ("GET", f"{V1}/topology"): EVERYONE,
    ("GET", f"{V1}/events"): EVERYONE,
    ("GET", f"{V1}/queue"): EVERYONE,
    ("GET", f"{V1}/changes"): EVERYONE,
    ("GET", f"{V1}/audit"): ADMIN,
    ("GET", f"{V1}/reports/usage"): EVERYONE,
    ("GET", f"{V1}/reports/history"): ADMIN,
    ("GET", f"{V1}/whoami"): EVERYONE,
    ("POST", f"{V1}/tokens"): ISSUERS,
    ("GET", f"{V1}/tokens"): ISSUERS,
    ("POST", f"{V1}/tokens/{{token_id}}/revoke"): ISSUERS,
}
"""Who may call each route (for jobs: jobs of the token's own teams)."""

TEAM_SCOPED = {route for route in ACCESS if "{job_id}" in route[1]} | {("POST", f"{V1}/jobs")}
"""Routes about one team's job: a token of another team gets 403 whatever its role."""

JOB = "matrix-job"
_TOKEN_NUMBERS = itertools.count(1)
NODE = "p5-0001"


def app_routes() -> list[tuple[str, str]]:
    """Every (method, path) the app serves, from ``app.routes``: also the routes the OpenAPI
    schema leaves out (``/metrics``, the docs). HEAD is GET's twin and left out."""
    app = create_app(Service.__new__(Service))
    return sorted(
        (method, path)
        for path, methods in _paths_and_methods(app.routes)
        for method in methods
        if method != "HEAD"
    )


def _paths_and_methods(routes: list[Any]) -> Iterator[tuple[str, set[str]]]:
    for route in routes:
        if isinstance(route, Route):
            yield route.path, set(route.methods or ())
        elif hasattr(route, "effective_route_contexts"):  # an included router (FastAPI 0.16x)
            for context in route.effective_route_contexts():
                yield context.path, set(getattr(context.original_route, "methods", ()) or ())
        elif isinstance(route, Mount) and isinstance(route.app, StaticFiles):  # the docs' assets
            yield f"{route.path}/{{asset}}", {"GET"}
        else:
            raise AssertionError(f"a route of a kind this test does not know: {route!r}")


ROUTES = app_routes()


def test_every_route_has_an_access_rule() -> None:
    assert set(ROUTES) == set(ACCESS), "add the new route to ACCESS and to docs/api.md"


def test_docs_list_every_route() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [f"{m} {p}" for m, p in ROUTES if f"`{m} {p.removeprefix(V1)}`" not in docs]
    assert not missing, f"docs/api.md does not describe: {missing}"


def test_only_the_documented_routes_answer_without_a_token(matrix_api: Api) -> None:
    answered = {}
    for method, path in ROUTES:
        response = _call(matrix_api, method, path, "anonymous")
        answered[path] = response.status_code
        assert response.status_code < 500, (method, path, response.text)
    assert {path for path, status in answered.items() if status != 401} == OPEN_ROUTES


@pytest.fixture(scope="module")
def matrix_api(shared_api: Api) -> Api:
    response = shared_api.client.post(
        f"{V1}/jobs", json=small_job(JOB), headers=shared_api.headers("admin")
    )
    assert response.status_code == 201, response.text
    return shared_api


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_each_role_is_allowed_or_forbidden(matrix_api: Api, method: str, path: str) -> None:
    allowed = ACCESS[(method, path)]
    for who in ("anonymous", *(role.value for role in Role)):
        response = _call(matrix_api, method, path, who)
        if who in allowed:
            assert response.status_code not in (401, 403), (who, method, path, response.text)
        elif who == "anonymous":
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["WWW-Authenticate"] == "Bearer"
        else:
            assert response.status_code == 403, (who, method, path, response.text)
            assert "may not" in response.json()["detail"]["message"]


@pytest.mark.parametrize(("method", "path"), sorted(TEAM_SCOPED))
def test_another_teams_token_cannot_touch_the_job(matrix_api: Api, method: str, path: str) -> None:
    response = _call(matrix_api, method, path, "outsider")
    assert response.status_code == 403, response.text
    assert "team nlp" in response.json()["detail"]["message"]


def _call(api: Api, method: str, path: str, who: str) -> Any:
    url = path.format(
        job_id=JOB,
        name=NODE,
        token_id=_member_token_id(api, who),
        version=1,
        asset="swagger-ui.css",
    )
    headers = {} if who == "anonymous" else api.headers(who)
    return api.client.request(method, url, headers=headers, json=_body(method, path, who))


def _body(method: str, path: str, who: str) -> object:
    if (method, path) == ("POST", f"{V1}/jobs"):
        return small_job(f"matrix-{who}")
    if (method, path) == ("PUT", f"{V1}/policy"):
        return yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    if (method, path) == ("POST", f"{V1}/cluster/apply"):
        cluster = load_cluster(CLUSTER_FILE)
        document = cluster_document(cluster.nodes, cluster.topology, cluster.name)
        return {"document": document, "dryRun": True}
    if (method, path) == ("POST", f"{V1}/tokens"):
        return {"name": f"made-by-{who}", "role": "member", "teams": [TEAM]}
    return None


def _member_token_id(api: Api, who: str) -> str:
    """A fresh member token of the team (so that every caller may revoke one)."""
    _, record = api.store.create_token(
        f"revocable-{who}-{next(_TOKEN_NUMBERS)}", Role.MEMBER.value, [TEAM]
    )
    return record.id


# --- token names: the audit actor is the token's identity ------------------------------------
@pytest.mark.parametrize("issuer", ["admin", "team-admin"])
@pytest.mark.parametrize("name", ["admin", "topoq", "system", "admin-2", "topoq-controller"])
def test_nobody_may_make_a_token_named_like_the_control_plane(
    api: Api, issuer: str, name: str
) -> None:
    body = {"name": name, "role": "member", "teams": [TEAM]}
    response = api.client.post(f"{V1}/tokens", json=body, headers=api.headers(issuer))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == "body.name" and "reserved" in detail["message"]
    assert name not in {t.name for t in api.store.tokens(include_revoked=True)} - {"admin"}


@pytest.mark.parametrize("name", ["Alice", "bob smith", "x" * 64, "-dash", "a_b"])
def test_a_token_name_must_be_a_dns_label(api: Api, name: str) -> None:
    body = {"name": name, "role": "member", "teams": [TEAM]}
    response = api.client.post(f"{V1}/tokens", json=body, headers=api.headers("team-admin"))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == "body.name" and "DNS-1123 label" in detail["hint"]


def test_a_token_name_is_never_reused_even_after_a_revocation(api: Api) -> None:
    body = {"name": "carol", "role": "member", "teams": [TEAM]}
    made = api.client.post(f"{V1}/tokens", json=body, headers=api.headers("team-admin"))
    assert made.status_code == 201, made.text
    again = api.client.post(f"{V1}/tokens", json=body, headers=api.headers("admin"))
    assert again.status_code == 409 and again.json()["detail"]["where"] == "body.name"
    [carol] = [t for t in api.store.tokens() if t.name == "carol"]
    api.client.post(f"{V1}/tokens/{carol.id}/revoke", headers=api.headers("admin"))
    after = api.client.post(f"{V1}/tokens", json=body, headers=api.headers("team-admin"))
    assert after.status_code == 409, after.text
    assert "revoked" in after.json()["detail"]["hint"]


def test_the_api_pages_load_every_script_and_style_from_the_server(matrix_api: Api) -> None:
    """No CDN: every asset /docs and /redoc name is a path of this server, and is served."""
    for page in ("/docs", "/redoc"):
        html = matrix_api.client.get(page).text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets, html
        for asset in assets:
            assert asset.startswith("/"), f"{page} loads {asset} from elsewhere"
            served = matrix_api.client.get(asset)
            assert served.status_code == 200 and len(served.content) > 1000, asset
