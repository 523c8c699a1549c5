"""The dashboard in a real browser against a real ``topoq server`` (issue 13 §4): jobs appear
on the map in the domains the API placed them in, team bars show the API's figures, a pending
job shows its reason, failed and cordoned nodes are marked, a viewer gets no admin action, and
an admin's cordon from the page reaches the API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import BLOCK, eventually
from topoq.testing.server import RunningServer, whole_node_submission


@pytest.fixture
def page(browser: Any, dashboard_server: RunningServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def admin_page(
    page: Any, dashboard_server: RunningServer, admin_token: str, jobs: dict[str, Any]
) -> Any:
    """The page signed in as the admin, with the jobs submitted."""
    return signed_in(page, dashboard_server.url, admin_token)


def signed_in(page: Any, url: str, token: str) -> Any:
    page.goto(url)
    page.fill("#token", token)
    page.click("#sign-in button[type=submit]")
    page.wait_for_selector("[data-node]")
    assert page.is_hidden("#sign-in")  # the form goes once signed in
    return page


def test_the_page_and_its_files_need_no_token_and_nothing_from_elsewhere(
    dashboard_server: RunningServer,
) -> None:
    page = httpx.get(f"{dashboard_server.url}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http://" not in page.text and "https://" not in page.text
    for asset in ("app.js", "api.js", "topology.js", "style.css"):
        served = httpx.get(f"{dashboard_server.url}/ui/{asset}")
        assert served.status_code == 200, asset
        assert "https://" not in served.text, asset
    for bad in ("../__init__.py", "..%2F__init__.py", "nothing.js", ".hidden", "__init__.py"):
        refused = httpx.get(f"{dashboard_server.url}/ui/{bad}")
        assert refused.status_code == 404, (bad, refused.status_code)
        assert "detail" in refused.json()


def test_a_bad_token_is_refused_and_kept_nowhere(
    browser: Any, dashboard_server: RunningServer
) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(dashboard_server.url)
    page.fill("#token", "not-a-token")
    page.click("#sign-in button[type=submit]")
    page.wait_for_selector("#sign-in-error:not(:empty)")
    assert "not valid" in page.text_content("#sign-in-error")
    assert page.evaluate("sessionStorage.length") == 0
    assert "not-a-token" not in page.url
    context.close()


def test_running_jobs_sit_on_the_map_where_the_api_placed_them(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    assert page.locator("[data-node]").count() == 64
    assert "null" not in page.inner_text("main") and "undefined" not in page.inner_text("main")
    for name in ("nlp-train", "vision-eval"):
        allocation = jobs[name]["allocation"]
        cells = page.locator(f".gpu[data-job='{name}']")
        assert cells.count() == jobs[name]["gpus"]
        on_map = set(
            page.eval_on_selector_all(
                f".gpu[data-job='{name}']",
                "cells => cells.map(c => c.closest('[data-node]').dataset.node)",
            )
        )
        assert on_map == set(allocation["nodes"])
    blocks = set(
        page.eval_on_selector_all(
            ".gpu[data-job='nlp-train']",
            f"cells => cells.map(c => c.closest('[data-level=\"{BLOCK}\"]').dataset.domain)",
        )
    )
    assert len(blocks) == 1  # required inside one block, and drawn inside one
    team = page.get_attribute(".gpu[data-job='nlp-train']", "data-team")
    assert team == "nlp"
    first_node = sorted(jobs["nlp-train"]["allocation"]["nodes"])[0]
    hover = page.get_attribute(f"[data-node='{first_node}'] .gpu[data-job='nlp-train']", "title")
    assert hover is not None and "team nlp" in hover and "pod w:" in hover  # job, team, rank
    page.click(".gpu[data-job='nlp-train']")
    page.wait_for_selector("[data-testid=job-card]")
    assert page.locator(".gpu.selected").count() == 16
    assert page.locator(".gpu.selected[data-job='nlp-train']").count() == 16
    page.screenshot(path=str(screenshots / "dashboard-topology.png"), full_page=True)


def test_team_bars_show_the_apis_figures(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    page.click("a[data-view=teams]")
    page.wait_for_selector("[data-testid=teams]")
    for team in admin.get("/teams").json():
        for flavor in team["flavors"]:
            row = f"tr[data-team='{team['name']}'][data-flavor='{flavor['flavor']}']"
            for figure, field in (
                ("guarantee", "guaranteeGpus"),
                ("used", "usedGpus"),
                ("borrowed", "borrowedGpus"),
                ("lent", "lentGpus"),
            ):
                shown = page.text_content(f"{row} [data-figure={figure}]")
                assert shown is not None and int(shown) == flavor[field], (row, figure)
    assert int(page.text_content("tr[data-team='nlp'] [data-figure=used]") or -1) == 16
    standing = {
        team["name"]: team["fairSharePosition"] for team in admin.get("/teams").json()
    }  # the demo shares idle GPUs by fair share: every team has a position
    assert all(position is not None for position in standing.values())
    for name, position in standing.items():
        rank = 1 + sum(other < position for other in standing.values())  # ties share a rank
        shown = page.text_content(f"tr[data-team='{name}'] [data-figure=fair-share]") or ""
        assert shown.startswith(f"{position:.3f}"), (name, shown)
        assert f"({rank}" in shown, (name, shown)
    page.screenshot(path=str(screenshots / "dashboard-teams.png"), full_page=True)


def test_a_pending_job_shows_why_it_waits(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    explained = admin.get("/jobs/speech-big/explain").json()
    page.click("a[data-view=queue]")
    row = page.wait_for_selector("tr[data-job='speech-big']")
    reason = row.query_selector("[data-reason]")
    assert reason is not None
    assert reason.get_attribute("data-reason") == explained["reason"]
    assert explained["message"].split(";")[0] in (reason.text_content() or "")
    remedies = row.query_selector_all("[data-testid=remedies] li")
    assert [r.text_content() for r in remedies] == explained["remedies"] != []
    page.screenshot(path=str(screenshots / "dashboard-queue.png"), full_page=True)


def test_the_queue_is_in_turn_order_and_follows_a_change_by_itself(
    admin_page: Any, admin: httpx.Client
) -> None:
    """Two more jobs that never fit wait behind speech-big, one of them held: the page lists
    them in the API's order, with their turns, the held one last; a release redraws it."""
    page = admin_page
    page.click("a[data-view=queue]")
    page.wait_for_selector("tr[data-job='speech-big']")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    for name in ("speech-next", "speech-held"):
        made = admin.post("/jobs", json=whole_node_submission(name, "speech", 20))
        assert made.status_code == 201, made.text
    assert admin.post("/jobs/speech-held/hold").status_code == 200
    try:
        page.wait_for_selector("tr[data-job='speech-held'][data-position='']")
        queue = admin.get("/queue").json()
        expected = [(row["id"], str(row["position"] or "")) for row in queue["items"]]
        shown = page.eval_on_selector_all(
            "[data-testid=queue] tbody tr",
            "rows => rows.map(r => [r.dataset.job, r.dataset.position])",
        )
        assert [tuple(row) for row in shown] == expected
        turns = dict(expected)
        assert int(turns["speech-big"]) < int(turns["speech-next"]) and turns["speech-held"] == ""
        assert any(url.endswith("/api/v1/changes") for url in requests)
        assert admin.post("/jobs/speech-held/release").status_code == 200
        page.wait_for_selector("tr[data-job='speech-held']:not([data-position=''])")
    finally:
        for name in ("speech-next", "speech-held"):
            admin.post(f"/jobs/{name}/cancel")


def test_an_idle_dashboard_asks_only_whether_anything_changed(admin_page: Any) -> None:
    """Nothing changes on the cluster for three seconds: the page asks ``/changes`` each
    second and reads no view again."""
    page = admin_page
    page.wait_for_selector("[data-node]")
    page.wait_for_timeout(1500)  # the first draws are done
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url.split("/api/v1")[-1]))
    page.wait_for_timeout(3000)
    assert requests.count("/changes") >= 2, requests
    assert set(requests) == {"/changes"}, requests


def test_failed_and_cordoned_nodes_are_marked_and_an_admins_cordon_reaches_the_api(
    admin_page: Any, admin: httpx.Client
) -> None:
    page = admin_page
    failed = admin.post("/nodes/p5-0064/fail")
    assert failed.status_code == 200, failed.text
    page.wait_for_selector("[data-node='p5-0064'][data-state=failed]")  # redrawn by itself
    page.click("[data-node='p5-0063'] .node-name")
    page.click("[data-testid=node-card] [data-action=cordon]")
    page.wait_for_selector("[data-node='p5-0063'][data-state=cordoned]")
    node = next(n for n in admin.get("/nodes").json() if n["name"] == "p5-0063")
    assert node["cordoned"] is True
    audit = admin.get("/audit").json()
    assert any("p5-0063" in str(entry) for entry in audit)  # recorded, under the admin's name
    page.click("[data-testid=node-card] [data-action=uncordon]")
    page.wait_for_selector("[data-node='p5-0063'][data-state=ready]")
    assert admin.post("/nodes/p5-0064/recover").status_code == 200


def test_a_viewer_sees_no_admin_action(
    page: Any,
    dashboard_server: RunningServer,
    admin: httpx.Client,
    jobs: dict[str, dict[str, Any]],
) -> None:
    made = admin.post("/tokens", json={"name": "dash-viewer", "role": "viewer", "teams": ["nlp"]})
    assert made.status_code == 201, made.text
    signed_in(page, dashboard_server.url, made.json()["token"])
    assert "viewer" in (page.text_content("#who") or "")
    page.click("[data-node='p5-0063'] .node-name")
    page.wait_for_selector("[data-testid=node-card]")
    assert page.locator("[data-action]").count() == 0
    page.click("a[data-view=queue]")
    row = page.wait_for_selector("tr[data-job='speech-big']")
    assert "another team" in (row.text_content() or "")  # a speech job, and the viewer is nlp's
    page.goto(f"{page.url.split('#')[0]}#job/nlp-train")  # its own team's job: no action either
    page.wait_for_selector("[data-testid=job][data-job='nlp-train']")
    assert page.locator("[data-action]").count() == 0


def test_a_jobs_page_shows_where_it_runs_its_history_and_its_output(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    page.click(".gpu[data-job='nlp-train']")
    page.click("[data-testid=job-card] a.open")
    page.wait_for_selector("[data-testid=job][data-job='nlp-train']")
    shown = set(
        page.eval_on_selector_all(
            "[data-testid=placement] [data-node]", "nodes => nodes.map(n => n.dataset.node)"
        )
    )
    assert shown == set(jobs["nlp-train"]["allocation"]["nodes"])
    assert "ranks 0" in (page.text_content("[data-testid=placement]") or "") or "rank 0" in (
        page.text_content("[data-testid=placement]") or ""
    )
    history = page.eval_on_selector_all(
        "[data-testid=history] li", "items => items.map(i => i.dataset.phase)"
    )
    assert history[-1] == "running" and "pending" in history
    terms = page.text_content("[data-testid=terms]") or ""
    detail = admin.get("/jobs/nlp-train").json()
    assert f"retries {detail['failures']} of {detail['maxRetry']} used" in terms
    page.wait_for_selector("[data-testid=logs] pre:has-text('rank')")  # the pods' own output
    page.screenshot(path=str(screenshots / "dashboard-job.png"), full_page=True)


def test_a_waiting_jobs_page_gives_the_reason_and_the_remedies_explain_gives(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]]
) -> None:
    page = admin_page
    explained = admin.get("/jobs/speech-big/explain").json()
    page.click("a[data-view=queue]")
    page.click("tr[data-job='speech-big'] a")
    page.wait_for_selector("[data-testid=why]")
    assert (
        page.get_attribute("[data-testid=why] [data-reason]", "data-reason") == explained["reason"]
    )
    remedies = page.eval_on_selector_all(
        "[data-testid=why] li", "items => items.map(i => i.textContent)"
    )
    assert remedies == explained["remedies"]


def test_an_admins_cancel_from_a_jobs_page_reaches_the_api(
    admin_page: Any, admin: httpx.Client
) -> None:
    made = admin.post("/jobs", json=whole_node_submission("dash-cancel", "vision"))
    assert made.status_code == 201, made.text
    page = admin_page
    page.goto(f"{page.url.split('#')[0]}#job/dash-cancel")
    page.click("[data-action=cancel]")
    page.wait_for_selector("[data-testid=job] [data-phase=cancelled]")
    assert admin.get("/jobs/dash-cancel").json()["phase"] == "cancelled"
    cause = admin.get("/jobs/dash-cancel/history").json()
    assert "admin" in str(cause)  # recorded as cancelled by the admin's token


def test_the_cluster_view_shows_capacity_health_activity_and_the_policy(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    assert admin.post("/nodes/p5-0062/cordon").status_code == 200
    try:
        page.click("a[data-view=cluster]")
        page.wait_for_selector("[data-testid=health] tr[data-node='p5-0062'][data-state=cordoned]")
        topology = admin.get("/topology").json()
        assert int(page.text_content("[data-figure=gpus-used]") or -1) == topology["gpusUsed"]
        assert int(page.text_content("[data-figure=gpus-free]") or -1) == topology["gpusFree"]
        admitted = [
            e
            for e in admin.get("/events?since_s=3600&limit=1000").json()
            if e["phase"] == "admitted"
        ]
        assert int(page.text_content("[data-figure=admitted]") or -1) == len(admitted) > 0
        version = admin.get("/policy").json()["version"]
        page.wait_for_selector(f"[data-testid=policy] tr[data-version='{version}']")
        page.wait_for_selector("[data-testid=gpu-hours] tr[data-day]")
        hours = admin.get("/reports/usage", params={"hourly": "true"}).json()["hours"]
        latest = page.locator("[data-testid=utilisation] .slot").last
        assert float(latest.get_attribute("data-hour") or -1) == hours[-1]["start"]
        in_use = float(latest.get_attribute("data-gpus") or -1)
        assert 0 < in_use <= topology["gpusUsed"]  # an average over the hour so far
        page.screenshot(path=str(screenshots / "dashboard-cluster.png"), full_page=True)
    finally:
        assert admin.post("/nodes/p5-0062/uncordon").status_code == 200


def test_the_teams_view_charts_the_weeks_gpu_hours_as_the_usage_report_gives_them(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]]
) -> None:
    page = admin_page
    page.click("a[data-view=teams]")
    row = "[data-testid=week] tr[data-team='nlp']"
    page.wait_for_selector(row)
    shown = float(page.text_content(f"{row} [data-figure=hours-guarantee]") or -1)
    days = admin.get("/reports/usage").json()["days"]
    reported = sum(day["gpuHoursInGuarantee"] for day in days if day["team"] == "nlp")
    assert abs(shown - reported) < 0.05  # the hours grow while the page and the test read them


def test_an_admin_edits_a_quota_seeing_the_lint_before_saving(
    admin_page: Any, admin: httpx.Client, jobs: dict[str, dict[str, Any]], screenshots: Path
) -> None:
    page = admin_page
    before = admin.get("/policy").json()
    page.click("a[data-view=teams]")
    page.click("tr[data-team='nlp'] [data-action=edit-quota]")
    editor = "[data-testid=quota-editor][data-team='nlp']"
    field = f"{editor} tr[data-flavor] input"
    page.fill(field, "100000")
    page.dispatch_event(field, "change")
    page.click("[data-action=check-quota]")
    page.wait_for_selector("[data-testid=lint] [data-accepted=false]")
    assert page.locator("[data-testid=lint] li[data-severity=error]").count() >= 1
    assert page.is_disabled("[data-action=save-quota]")  # an error: nothing can be saved
    page.screenshot(path=str(screenshots / "dashboard-quota-lint.png"), full_page=True)
    page.fill(field, "20")
    page.dispatch_event(field, "change")
    assert page.is_disabled("[data-action=save-quota]")  # changed since the check
    page.click("[data-action=check-quota]")
    page.wait_for_selector("[data-testid=lint] [data-accepted=true]")
    page.click("[data-action=save-quota]")
    page.wait_for_selector("[data-testid=teams]")  # back to the table
    after = admin.get("/policy").json()
    assert after["version"] == before["version"] + 1
    nlp = next(team for team in after["document"]["teams"] if team["name"] == "nlp")
    assert nlp["quotas"][0]["instances"] == 20
    guarantee = page.text_content("tr[data-team='nlp'] [data-figure=guarantee]")
    page.wait_for_selector("tr[data-team='nlp'] [data-figure=guarantee]:has-text('160')")
    assert guarantee is not None
    restored = admin.put("/policy", json=before["document"])
    assert restored.status_code == 200, restored.text


def test_a_viewer_gets_no_quota_editor(
    page: Any, dashboard_server: RunningServer, admin: httpx.Client, jobs: dict[str, Any]
) -> None:
    made = admin.post("/tokens", json={"name": "dash-viewer-2", "role": "viewer", "teams": ["nlp"]})
    assert made.status_code == 201, made.text
    signed_in(page, dashboard_server.url, made.json()["token"])
    page.click("a[data-view=teams]")
    page.wait_for_selector("[data-testid=teams]")
    assert page.locator("[data-action=edit-quota]").count() == 0


def test_an_admins_drain_from_the_map_requeues_the_nodes_gang(
    admin_page: Any, admin: httpx.Client
) -> None:
    made = admin.post("/jobs", json=whole_node_submission("dash-drain", "vision"))
    assert made.status_code == 201, made.text
    running = eventually(
        lambda: admin.get("/jobs/dash-drain").json(), lambda j: j["phase"] == "running"
    )
    [node] = running["allocation"]["nodes"]
    page = admin_page
    page.wait_for_selector(f"[data-node='{node}'] .gpu[data-job='dash-drain']")
    page.click(f"[data-node='{node}'] .node-name")
    page.click("[data-testid=node-card] [data-action=drain]")
    page.wait_for_selector("[data-testid=node-card] [data-action=confirm-drain]")  # asked once more
    assert "send its 1 gang(s) back" in (page.text_content("[data-testid=node-card]") or "")
    page.click("[data-testid=node-card] [data-action=confirm-drain]")
    page.wait_for_selector(f"[data-node='{node}'][data-state=cordoned]")
    history = admin.get("/jobs/dash-drain/history").json()
    assert "drain" in str(history).lower()  # requeued by the drain, and why
    assert admin.post(f"/nodes/{node}/uncordon").status_code == 200
    assert admin.post("/jobs/dash-drain/cancel").status_code in (200, 202)
