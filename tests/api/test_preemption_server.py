"""Preemption waits for the victim to stop, through a real ``topoq server`` with the local
executor (issue 9): the victim is PREEMPTING (listed and explained) while its pods checkpoint
on SIGTERM, and its nodes show it as being stopped; its preemptor starts only after the
victim's checkpoint line was written and its pods were gone."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import CLUSTER_FILE, small_job
from tests.api.test_server import client, wait_for
from topoq.testing.server import running_server

CHECKPOINTING_TRAINER = """
import signal, sys, time
def checkpoint(*_):
    time.sleep(3)
    print(f"checkpoint saved at {time.time():.3f}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint)
print("training", flush=True)
time.sleep(300)
"""
PREEMPTOR = "import time; print(f'preemptor started at {time.time():.3f}', flush=True)"
POLICY = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: preemption}
scheduling:
  preemption: {gracePeriodS: 20}
teams:
- name: nlp
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
- name: vision
  borrowLimitPercent: 100
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""


def job_running(name: str, team: str, program: str) -> dict[str, Any]:
    body = small_job(name, pods=2, team=team)
    pod_set = body["document"]["spec"]["podSets"][0]  # type: ignore[index]  # small_job's shape
    pod_set["command"] = [sys.executable, "-c", program]
    return body


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir = tmp_path_factory.mktemp("server")
    policy = data_dir.with_name("preemption-policy.yaml")
    policy.write_text(POLICY, encoding="utf-8")
    with running_server(data_dir, cluster=CLUSTER_FILE, policy=policy) as running:
        yield client(running.url, (data_dir / "admin-token").read_text().strip())


def phase(admin: httpx.Client, job: str) -> str:
    return str(admin.get(f"/jobs/{job}").json()["phase"])


def log_time(admin: httpx.Client, job: str, words: str) -> float | None:
    text = admin.get(f"/jobs/{job}/logs", params={"pod": 0}).json().get("text", "")
    found = re.search(rf"{words} at ([0-9.]+)", text)
    return float(found[1]) if found else None


def test_the_preemptor_starts_only_after_the_victim_checkpointed_and_stopped(
    admin: httpx.Client,
) -> None:
    vision = [f"vision-{n}" for n in range(4)]  # 8 nodes: 4 in guarantee, 4 borrowed from nlp
    for name in vision:
        made = admin.post("/jobs", json=job_running(name, "vision", CHECKPOINTING_TRAINER))
        assert made.status_code == 201, made.text
    for name in vision:
        assert wait_for(lambda n=name: phase(admin, n), lambda p: p == "running") == "running"
    made = admin.post("/jobs", json=job_running("nlp-train", "nlp", PREEMPTOR))
    assert made.status_code == 201, made.text

    listed = wait_for(
        lambda: admin.get("/jobs", params={"phase": "preempting"}).json()["items"],
        bool,
    )
    [victim] = [item["id"] for item in listed]  # its pods checkpoint for 3 s meanwhile
    assert admin.get(f"/jobs/{victim}").json()["preemptedFor"] == "nlp-train"
    explained = admin.get(f"/jobs/{victim}/explain").json()
    assert explained["phase"] == "preempting"
    assert "preempted for nlp-train since" in explained["message"], explained
    assert explained["numbers"]["preempted_for"] == "nlp-train"
    waiting = admin.get("/jobs/nlp-train/explain").json()
    assert waiting["reason"] == "WAITING_FOR_VICTIMS" and victim in waiting["message"]
    holders = [h for node in admin.get("/nodes").json() for h in node["holders"]]
    assert {h["stopping"] for h in holders if h["job"] == victim} == {True}  # keeps its room
    assert not any(h["stopping"] for h in holders if h["job"] != victim)

    started = wait_for(
        lambda: log_time(admin, "nlp-train", "preemptor started"), lambda t: t is not None
    )
    checkpointed = log_time(admin, victim, "checkpoint saved")
    assert started is not None and checkpointed is not None
    assert checkpointed <= started  # the victim's pods were gone before the preemptor began
    history = admin.get(f"/jobs/{victim}").json()["history"]
    assert [c["phase"] for c in history][-2:] == ["preempting", "pending"]
    assert history[-1]["cause"] == "requeued after preemption: its pods stopped"
    assert admin.get(f"/jobs/{victim}").json()["preemptions"] == 1
    others = [name for name in vision if name != victim]
    assert all(phase(admin, name) == "running" for name in others)
