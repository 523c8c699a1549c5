"""Fair-share usage through real server processes: while a team borrows, ``explain`` shows
its decayed usage, borrowed share, weight and position; the usage is in the database when the
server stops, and a new server on the same data goes on from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.api.conftest import CLUSTER_FILE, TEAM, small_job, waits_forever
from tests.api.test_server import client, wait_for
from tests.cli.test_server_cli import topoq
from topoq.domain.governance import TeamName
from topoq.store import open_store
from topoq.testing.server import running_server

HALF_LIFE_S = 60
POLICY = {
    "apiVersion": "topoq.io/v1",
    "kind": "Policy",
    "metadata": {"name": "usage"},
    "scheduling": {
        "idleAllocation": "fair-share",
        "fairShare": {"usageHalfLifeS": HALF_LIFE_S},
    },
    "teams": [
        {
            "name": name,
            "fairShareWeight": weight,
            "absoluteBorrowLimits": {"ml.p5.48xlarge": {"nvidia.com/gpu": 64}},
        }
        for name, weight in ((TEAM, 2), ("vision", 1))
    ],
}


def standing(admin: httpx.Client, job: str, team: str) -> dict[str, Any]:
    explained = admin.get(f"/jobs/{job}/explain").json()
    rows = {row["team"]: row for row in explained["fairShare"]}
    return rows[team]


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    return path


def test_usage_is_explained_and_survives_a_restart(tmp_path: Path, policy_file: Path) -> None:
    data_dir = tmp_path / "data"
    environment = os.environ | {"TOPOQ_SLEEP_S": "120"}
    options: dict[str, Any] = {"cluster": CLUSTER_FILE, "environment": environment}
    with running_server(data_dir, policy=policy_file, **options) as first:
        admin = client(first.url, (data_dir / "admin-token").read_text().strip())
        assert admin.post("/jobs", json=small_job("hog")).status_code == 201  # 2 of 8 nodes
        assert admin.post("/jobs", json=waits_forever("wide")).status_code == 201
        assert admin.post("/jobs/wide/hold").status_code == 200  # it waits all along
        running = wait_for(lambda: admin.get("/jobs/hog").json(), lambda j: j["phase"] == "running")
        assert running["phase"] == "running"
        row = wait_for(lambda: standing(admin, "wide", TEAM), lambda r: r["usage"] > 0.001)
        assert row["borrowedShare"] == 0.25 and row["weight"] == 2
        assert row["usage"] > 0.001
        assert row["position"] == pytest.approx((0.25 + row["usage"]) / 2)
        cli = {"TOPOQ_SERVER": first.url, "TOPOQ_TOKEN_FILE": str(data_dir / "admin-token")}
        printed = topoq(cli, "explain", "wide")
        assert printed.returncode == 0, printed.stderr
        assert "fair share (the lowest position is served first):" in printed.stdout
        assert f"{TEAM}: weight 2, borrows 25.0% now, usage " in printed.stdout
        explained = admin.get("/jobs/wide/explain").json()
        assert explained["reason"] == "HELD"
        assert [r["team"] for r in explained["fairShare"]] == [TEAM]  # vision has no usage
        assert admin.post("/jobs/hog/cancel").status_code == 200
        wait_for(lambda: standing(admin, "wide", TEAM), lambda r: r["borrowedShare"] == 0)
    with open_store(None, data_dir) as store:
        saved = store.fair_share_usage()[TeamName(TEAM)]
    assert saved.share >= row["usage"] * 0.9  # at least what explain showed, a little decayed
    with running_server(data_dir, **options) as second:
        admin = client(second.url, (data_dir / "admin-token").read_text().strip())
        again = standing(admin, "wide", TEAM)
        assert again["borrowedShare"] == 0  # nothing runs: only the stored usage explains it
        assert 0 < again["usage"] <= saved.share
        assert again["usage"] > saved.share / 2  # less than a half-life went by
