"""A policy with cohorts applied to a real `topoq server` with `topoq policy apply`: a team
borrows across to its sibling cohort until its own cohort's borrow limit stops it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_server_cli import API_TESTS, topoq
from topoq.testing.server import running_server

COHORT_POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: cohorts}
teams:
- name: nlp
  cohort: [org, lang]
  absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 48}}
  quotas: [{flavor: ml.p5.48xlarge, instances: 2}]
- name: vision
  cohort: [org, vis]
  quotas: [{flavor: ml.p5.48xlarge, instances: 6}]
cohorts:
- name: lang
  parent: [org]
  absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 8}}
"""


def job_file(tmp_path: Path, name: str, pods: int) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        "apiVersion: topoq.io/v1\nkind: Job\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n  podSets:\n"
        f"  - {{name: workers, count: {pods}, requests: {{nvidia.com/gpu: 8}}}}\n"
    )
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("cohort-server")
    with running_server(
        data_dir,
        cluster=API_TESTS / "cluster.yaml",
        policy=API_TESTS / "policy.yaml",
        environment=os.environ | {"TOPOQ_SLEEP_S": "60"},
        through_cli=True,
    ) as running:
        yield {"TOPOQ_SERVER": running.url, "TOPOQ_TOKEN_FILE": str(data_dir / "admin-token")}


def wait_for_phase(server: dict[str, str], job: str, phase: str) -> str:
    deadline = time.monotonic() + 30
    while phase not in (explained := topoq(server, "explain", job)).stdout:
        assert time.monotonic() < deadline, explained.stdout + explained.stderr
        time.sleep(0.5)
    return explained.stdout


def test_a_borrow_is_limited_by_the_teams_cohort(server: dict[str, str], tmp_path: Path) -> None:
    policy_file = tmp_path / "cohorts.yaml"
    policy_file.write_text(COHORT_POLICY)
    applied = topoq(server, "policy", "apply", policy_file)
    assert applied.returncode == 0, applied.stderr
    current = topoq(server, "policy", "current").stdout
    assert "cohorts:" in current and "parent:" in current
    for name, pods in (("own", 2), ("across", 1), ("over", 1)):
        submitted = topoq(server, "submit", job_file(tmp_path, name, pods), "--team", "nlp")
        assert submitted.returncode == 0, submitted.stderr
        if name != "over":
            wait_for_phase(server, name, "running")  # inside the guarantee, then 8 across
    explained = wait_for_phase(server, "over", "BORROW_LIMIT_REACHED")
    assert "cohort org/lang would take 16 nvidia.com/gpu from outside it" in explained
    for name in ("own", "across", "over"):
        topoq(server, "cancel", name)


def test_a_policy_with_a_broken_cohort_tree_is_refused(
    server: dict[str, str], tmp_path: Path
) -> None:
    policy_file = tmp_path / "broken.yaml"
    policy_file.write_text(COHORT_POLICY.replace("parent: [org]", "parent: [orgg]"))
    refused = topoq(server, "policy", "apply", policy_file)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cohort path org/lang puts cohort lang under org" in refused.stderr
    assert "write the path as orgg/lang" in refused.stderr and "Traceback" not in refused.stderr
