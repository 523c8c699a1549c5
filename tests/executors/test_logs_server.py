"""The path users take (issue 8): through a real ``topoq server``, a member of one team cannot
read another team's logs and reads only its own, and every read is capped, over the API and
with ``topoq logs``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import CLUSTER_FILE, POLICY_FILE, small_job
from tests.api.test_server import client, wait_for
from topoq.testing.server import running_server, serving_api_process_ids

MIB = 1 << 20
TALKER = """
import os, sys, time
print("output of", os.environ["TOPOQ_JOB_ID"], flush=True)
sys.stdout.write(("x" * 1023 + "\\n") * 3 * 1024)  # 3 MiB
print("the end", flush=True)
time.sleep(60)
"""


def _talking_job(job_id: str, team: str) -> dict[str, Any]:
    body = small_job(job_id, pods=1, team=team)
    pod_set = body["document"]["spec"]["podSets"][0]  # type: ignore[index]  # small_job's shape
    pod_set["command"] = [sys.executable, "-c", TALKER]
    return body


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, int]]:
    """The server's URL, data directory and process id."""
    data_dir = tmp_path_factory.mktemp("server")
    with running_server(data_dir, cluster=CLUSTER_FILE, policy=POLICY_FILE) as running:
        yield running.url, data_dir, running.process.pid


@pytest.fixture(scope="module")
def server(server_process: tuple[str, Path, int]) -> tuple[str, Path]:
    return server_process[:2]


@pytest.fixture(scope="module")
def members(server: tuple[str, Path]) -> dict[str, tuple[str, httpx.Client]]:
    """A member token and client per team; each team runs one talking job."""
    url, data_dir = server
    admin = client(url, (data_dir / "admin-token").read_text().strip())
    found = {}
    for team in ("nlp", "vision"):
        made = admin.post(
            "/tokens", json={"name": f"{team}-member", "role": "member", "teams": [team]}
        )
        assert made.status_code == 201, made.text
        token = made.json()["token"]
        member = client(url, token)
        submitted = member.post("/jobs", json=_talking_job(f"{team}-run", team))
        assert submitted.status_code == 201, submitted.text
        found[team] = (token, member)
    for team, (_, member) in found.items():
        logs = wait_for(
            lambda m=member, t=team: m.get(f"/jobs/{t}-run/logs", params={"pod": 0}),
            lambda r: r.status_code == 200 and "the end" in r.json()["text"],
            timeout_s=30,
        )
        assert "the end" in logs.json()["text"], logs.text
    return found


def test_a_member_reads_only_its_own_teams_logs(
    members: dict[str, tuple[str, httpx.Client]],
) -> None:
    _, nlp = members["nlp"]
    refused = nlp.get("/jobs/vision-run/logs")
    assert refused.status_code == 403, refused.text
    assert "output of vision-run" not in refused.text
    own = nlp.get("/jobs/nlp-run/logs", params={"pod": 0, "tail_bytes": 4 * MIB}).json()
    assert "output of nlp-run" in own["text"] and "vision-run" not in own["text"]


def test_every_read_is_capped_and_says_where_to_read_on(
    members: dict[str, tuple[str, httpx.Client]],
) -> None:
    _, nlp = members["nlp"]
    tail = nlp.get("/jobs/nlp-run/logs", params={"pod": 0}).json()
    assert tail["truncated"] and len(tail["text"].encode()) == MIB
    (pod,) = tail["pods"]
    assert pod["nextOffset"] == pod["sizeBytes"] > MIB and tail["text"].endswith("the end\n")
    piece = nlp.get("/jobs/nlp-run/logs", params={"pod": 0, "offset": 0, "limit_bytes": 100})
    assert piece.json()["text"] == "output of nlp-run\n" + "x" * 82
    assert piece.json()["pods"][0]["nextOffset"] == 100 and piece.json()["truncated"]
    for params, where in [
        ({"tail_bytes": 16 * MIB + 1}, "tail_bytes"),
        ({"offset": 0}, "offset"),
        ({"pod": 0, "limit_bytes": 10}, "limit_bytes"),
    ]:
        answer = nlp.get("/jobs/nlp-run/logs", params=params)
        assert answer.status_code == 422, (params, answer.text)
        assert where in answer.text


def _topoq(url: str, token: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    topoq = str(Path(sys.executable).with_name("topoq"))  # the installed command
    command = [topoq, *arguments, "--server", url, "--token", token]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")}
    return subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=60, env=environment
    )


def test_topoq_logs_reads_a_tail_or_a_range(
    server: tuple[str, Path], members: dict[str, tuple[str, httpx.Client]]
) -> None:
    url, _ = server
    token, _ = members["nlp"]
    tail = _topoq(url, token, "logs", "nlp-run", "--pod", "0", "--tail-bytes", "8")
    assert (tail.returncode, tail.stdout) == (0, "the end\n"), tail.stderr
    assert "--offset" in tail.stderr
    piece = _topoq(
        url, token, "logs", "nlp-run", "--pod", "0", "--offset", "4", "--limit-bytes", "6"
    )
    assert (piece.returncode, piece.stdout) == (0, "ut of "), piece.stderr
    assert "--offset 10" in piece.stderr
    wrong = _topoq(url, token, "logs", "nlp-run", "--offset", "4")
    assert wrong.returncode == 2 and "offset" in wrong.stderr
    assert "Traceback" not in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
    theirs = _topoq(url, token, "logs", "vision-run")
    assert theirs.returncode == 4 and "output of" not in theirs.stdout


STEPS = """
import time
for step in range(8):
    print(f"step {step}", flush=True)
    time.sleep(0.3)
"""


def test_topoq_logs_follow_prints_every_line_once_until_the_job_ends(
    server: tuple[str, Path], members: dict[str, tuple[str, httpx.Client]]
) -> None:
    url, _ = server
    token, nlp = members["nlp"]
    body = small_job("nlp-steps", pods=2, team="nlp")
    pod_set = body["document"]["spec"]["podSets"][0]  # type: ignore[index]  # small_job's shape
    pod_set["command"] = [sys.executable, "-c", STEPS]
    assert nlp.post("/jobs", json=body).status_code == 201
    wait_for(lambda: nlp.get("/jobs/nlp-steps/logs"), lambda r: r.status_code == 200)
    followed = _topoq(url, token, "logs", "nlp-steps", "--follow")
    assert followed.returncode == 0, followed.stderr
    for pod in (0, 1):  # each line once, in order, under its pod's prefix
        prefix = f"[pod {pod}] "
        steps = [line for line in followed.stdout.splitlines() if line.startswith(prefix)]
        assert steps == [f"{prefix}step {n}" for n in range(8)], followed.stdout
    assert len(followed.stdout.splitlines()) == 16, followed.stdout


HUGE = """
import os, time
os.ftruncate(1, 300 << 20)  # a 300 MB log at once (sparse), as a pod that wrote it would leave
os.write(1, b"after the flood\\n")
time.sleep(60)
"""


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_huge_log_neither_stays_on_disk_nor_grows_the_api_process(
    server_process: tuple[str, Path, int], members: dict[str, tuple[str, httpx.Client]]
) -> None:
    _, data_dir, server_pid = server_process
    _, vision = members["vision"]
    body = small_job("vision-flood", pods=1, team="vision")
    pod_set = body["document"]["spec"]["podSets"][0]  # type: ignore[index]  # small_job's shape
    pod_set["command"] = [sys.executable, "-c", HUGE]
    assert vision.post("/jobs", json=body).status_code == 201
    logs = data_dir / "runs" / "vision" / "vision-flood" / "1"
    flooded = wait_for(
        lambda: vision.get("/jobs/vision-flood/logs", params={"pod": 0}).json(),
        lambda read: read.get("text", "").endswith("after the flood\n"),
        timeout_s=30,
    )
    assert flooded["truncated"] and len(flooded["text"].encode()) == MIB
    on_disk = wait_for(
        lambda: sum(p.stat().st_size for p in logs.glob("pod-0.log*")),
        lambda size: size <= 64 * MIB,  # rotated down to the default limit at the next poll
        timeout_s=30,
    )
    assert 0 < on_disk <= 64 * MIB
    (api,) = serving_api_process_ids(server_pid)
    before = _rss_bytes(api)
    for _ in range(5):  # NULs are 6 bytes each in JSON: 24 MB an answer
        read = vision.get("/jobs/vision-flood/logs", params={"pod": 0, "tail_bytes": 4 * MIB})
        assert read.status_code == 200 and read.json()["truncated"]
        assert len(read.json()["text"].encode()) == 4 * MIB
    assert _rss_bytes(api) - before < 150 * MIB
