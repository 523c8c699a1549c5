"""Dependencies as a user meets them on a real ``topoq server`` (SQLite store, local executor,
real pod processes), through the CLI: ``--after-ok prep`` waits while prep runs (``list`` and
``explain`` say on what) and starts once prep succeeded instead of being cancelled; an
upstream job that ended before the submission counts; after-failed and after-ok follow a
failed job; an unknown upstream id and a job that names itself are refused (exit 2, one line,
nothing stored)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.test_server_cli import server, topoq  # noqa: F401 the real server fixture


def job_file(directory: Path, name: str, *, sleep_s: float = 0.2, exit_code: int = 0) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(
        f"""\
apiVersion: topoq.io/v1
kind: Job
metadata: {{name: {name}, namespace: hyperpod-ns-nlp}}
spec:
  podSets:
  - name: workers
    count: 1
    requests: {{nvidia.com/gpu: 8}}
    environment: {{TOPOQ_SLEEP_S: "{sleep_s}", TOPOQ_EXIT_CODE: "{exit_code}"}}
"""
    )
    return path


def phase_of(env: dict[str, str], job: str) -> str:
    described = topoq(env, "describe", job)
    assert described.returncode == 0, described.stderr
    phase: str = json.loads(described.stdout)["phase"]
    return phase


def wait_until_finished(env: dict[str, str], job: str, timeout_s: float = 40) -> str:
    deadline = time.monotonic() + timeout_s
    while (phase := phase_of(env, job)) not in ("succeeded", "failed", "cancelled"):
        assert time.monotonic() < deadline, f"{job} is still {phase}"
        time.sleep(0.3)
    return phase


def submitted(env: dict[str, str], *args: str | Path) -> None:
    result = topoq(env, "submit", *args)
    assert result.returncode == 0, result.stderr


def test_after_ok_waits_while_prep_runs_then_starts_instead_of_being_cancelled(
    server: dict[str, str],  # noqa: F811 the fixture
    tmp_path: Path,
) -> None:
    submitted(server, job_file(tmp_path, "prep", sleep_s=4))
    submitted(server, job_file(tmp_path, "train"), "--after-ok", "prep")
    listing = topoq(server, "list", "--phase", "pending")
    assert listing.returncode == 0, listing.stderr
    [row] = [line for line in listing.stdout.splitlines() if line.split()[:1] == ["train"]]
    assert "WAITING_ON_DEPENDENCY: after-ok prep" in row
    explained = topoq(server, "explain", "train")
    assert explained.returncode == 0, explained.stderr
    assert "depends on:" in explained.stdout
    assert "after-ok prep: " in explained.stdout and "(open)" in explained.stdout
    assert wait_until_finished(server, "prep") == "succeeded"
    assert wait_until_finished(server, "train") == "succeeded"  # not cancelled
    done = topoq(server, "explain", "train")
    assert "after-ok prep: succeeded (met)" in done.stdout
    # prep ended before this submission: its end still counts
    submitted(server, job_file(tmp_path, "late"), "--after-ok", "prep", "--after-any", "train")
    assert wait_until_finished(server, "late") == "succeeded"


def test_a_failed_upstream_job_starts_after_failed_and_cancels_after_ok(
    server: dict[str, str],  # noqa: F811 the fixture
    tmp_path: Path,
) -> None:
    submitted(server, job_file(tmp_path, "flaky", sleep_s=1, exit_code=3))
    submitted(server, job_file(tmp_path, "cleanup"), "--after-failed", "flaky")
    submitted(server, job_file(tmp_path, "publish"), "--after-ok", "flaky")
    assert wait_until_finished(server, "flaky") == "failed"
    assert wait_until_finished(server, "cleanup") == "succeeded"
    assert wait_until_finished(server, "publish") == "cancelled"
    explained = topoq(server, "explain", "publish")
    assert "after-ok flaky: it ended failed" in explained.stdout
    assert "after-ok flaky: failed (broken)" in explained.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--after-ok", "nope"), "no job has the id 'nope'"),
        (("--id", "selfish", "--after-any", "selfish"), "the job depends on itself"),
    ],
)
def test_an_unknown_upstream_id_or_self_dependency_is_refused_in_one_line(
    server: dict[str, str],  # noqa: F811 the fixture
    tmp_path: Path,
    args: tuple[str, ...],
    message: str,
) -> None:
    refused = topoq(server, "submit", job_file(tmp_path, "refused"), *args)
    assert refused.returncode == 2, refused.stderr
    assert message in refused.stderr and "dependencies[0].job" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    for job in ("refused", "selfish"):
        assert topoq(server, "describe", job).returncode == 2  # nothing was stored
