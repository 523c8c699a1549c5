"""A real ``topoq server`` on the demo cluster and policy, and Debian's chromium driven by
Playwright (ADR 0013): the dashboard is tested the way a user opens it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from playwright.sync_api import sync_playwright

from topoq.testing.server import RunningServer, running_server, whole_node_submission

CHROMIUM = Path(os.environ.get("TOPOQ_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no connections out: this machine has no network
    "--disable-component-update",
    "--disable-sync",
]
DEMO = files("topoq") / "data" / "demo"
BLOCK = "topology.k8s.aws/network-node-layer-2"


def _chromium_needed() -> None:
    if not CHROMIUM.exists():
        message = (
            f"the dashboard's tests need Debian's chromium at {CHROMIUM} (apt install chromium)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)  # in CI the browser is installed by .ci/run: never skip there
        pytest.skip(message)


@pytest.fixture(scope="package")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("dashboard") / "data"
    environment = os.environ | {"TOPOQ_SLEEP_S": "600"}
    with running_server(
        data_dir,
        cluster=Path(str(DEMO / "cluster.yaml")),
        policy=Path(str(DEMO / "policy.yaml")),
        environment=environment,
    ) as server:
        yield server


@pytest.fixture(scope="package")
def admin_token(dashboard_server: RunningServer) -> str:
    return (dashboard_server.data_dir / "admin-token").read_text().strip()


@pytest.fixture(scope="package")
def admin(dashboard_server: RunningServer, admin_token: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{dashboard_server.url}/api/v1",
        headers={"Authorization": f"Bearer {admin_token}"},
        timeout=30,
    ) as client:
        yield client


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    _chromium_needed()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="package")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests' screenshots go: ``TOPOQ_SCREENSHOTS`` if set (the docs' pictures are
    taken so), else the test run's temporary directory."""
    chosen = os.environ.get("TOPOQ_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


T = TypeVar("T")


def eventually(read: Callable[[], T], good: Callable[[T], bool], timeout_s: float = 30) -> T:
    deadline = time.monotonic() + timeout_s
    value = read()
    while not good(value) and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return value


@pytest.fixture(scope="package")
def jobs(admin: httpx.Client) -> dict[str, dict[str, Any]]:
    """Two running gangs (nlp inside one block, vision on one node) and a speech job that
    waits: speech never borrows, and 20 nodes are more than its 16."""
    for body in (
        whole_node_submission("nlp-train", "nlp", 2, required=BLOCK),
        whole_node_submission("vision-eval", "vision"),
        whole_node_submission("speech-big", "speech", 20),
    ):
        made = admin.post("/jobs", json=body)
        assert made.status_code == 201, made.text
    found = {}
    for name, phase in (("nlp-train", "running"), ("vision-eval", "running")):
        found[name] = eventually(
            lambda n=name: admin.get(f"/jobs/{n}").json(), lambda j, p=phase: j["phase"] == p
        )
        assert found[name]["phase"] == phase, found[name]
    found["speech-big"] = eventually(
        lambda: admin.get("/jobs?phase=pending").json()["items"],
        lambda items: any(i["id"] == "speech-big" and i["reason"] for i in items),
    )
    return found
