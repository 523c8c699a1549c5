"""SIGKILL the server at random moments under a stream of submissions, restart it on the same
data directory each time, and check that nothing was lost, duplicated or booked twice.

A real server (SQLite store, local executor running real pods, the tests' 8-node cluster) gets
a job submitted every few tens of milliseconds from a client thread; each job is one pod on a
whole node that sleeps briefly, so the nodes fill, the queue grows and gangs start and end all
the time. The server is killed ``KILLS`` times at seeded random moments; after each kill the
store is checked as the crash left it, the server is restarted, and the pods the killed server
left behind run on for the gangs it adopts (their attempt still holds its nodes) and must be
gone for every other. At the end every acknowledged submission is in the
store exactly once, with exactly one audit entry, and the pods alive match the store.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.crash.harness import (
    Pod,
    ServerProcess,
    Submitter,
    kill_pods,
    live_pods,
)
from topoq.domain.job import JobPhase, JobView
from topoq.domain.quantity import NVIDIA_GPU
from topoq.store import SqlStore, open_store

SEED = 20261130
KILLS = 5
RUN_BETWEEN_KILLS_S = (2.0, 4.5)
SUBMIT_PAUSE_S = 0.02
POD_SLEEP_S = 1.5
SETTLE_S = 2.0
STOP_GRACE_S = 3.0
"""The local executor's SIGTERM-to-SIGKILL grace: a pod whose job was just preempted or
cancelled may live this long after the store says so."""
GONE_DEADLINE_S = 5.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path, run_id=uuid.uuid4().hex, pod_sleep_s=POD_SLEEP_S)
    try:
        yield process
    finally:
        process.stop()
        kill_pods(process.run_id)


def test_sigkill_at_random_moments_loses_duplicates_and_double_books_nothing(
    server: ServerProcess,
) -> None:
    rng = random.Random(SEED)
    server.start()
    submitter = Submitter(server.url, server.token(), SUBMIT_PAUSE_S)
    submitter.start()
    orphans = adoptions = 0
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(*RUN_BETWEEN_KILLS_S))
            server.kill()
            left_behind = live_pods(server.run_id)
            orphans += len(left_behind)
            with open_store(None, server.data_dir) as store:
                check_no_gpu_is_booked_twice(store)
            server.start()
            with open_store(None, server.data_dir) as store:
                jobs = store.jobs(include_finished=True)
            requeued = [pod for pod in left_behind if not adopted(pod, jobs)]
            adoptions += len(left_behind) - len(requeued)
            gone = wait_until_gone(server.run_id, requeued)
            assert gone == [], "pods of gangs the restarted server requeued outlived it"
        time.sleep(SETTLE_S)
    finally:
        submitter.stop()
    assert submitter.retries > 0, "no kill ever hit a submission: the test proves little"
    assert orphans > 0, "no kill left a pod behind: the test proves little"
    assert adoptions > 0, "no running gang was adopted after a restart"
    assert set(submitter.answers) <= {201, 409}, submitter.answers
    with open_store(None, server.data_dir) as store:
        check_every_acknowledged_job_is_stored_once(store, submitter.acknowledged)
        check_no_gpu_is_booked_twice(store)
        check_pods_match_the_store(store, server.run_id)
    check_the_api_agrees(server)


def adopted(pod: Pod, jobs: dict[str, JobView]) -> bool:
    """Whether the restarted server kept the pod's gang running (same attempt, not requeued):
    the pods of a gang that lost none while the server was down run on."""
    job = jobs.get(pod.job)
    return job is not None and str(job.attempt) == pod.attempt and job.phase is not JobPhase.PENDING


def check_every_acknowledged_job_is_stored_once(store: SqlStore, acknowledged: list[str]) -> None:
    assert len(acknowledged) == len(set(acknowledged)), "an id was acknowledged twice"
    stored = [job_id for job_id in store.jobs(include_finished=True) if job_id.startswith("crash")]
    assert len(stored) == len(set(stored))
    assert set(stored) == set(acknowledged), (
        f"lost: {sorted(set(acknowledged) - set(stored))[:5]}, "
        f"never acknowledged: {sorted(set(stored) - set(acknowledged))[:5]}"
    )
    submits = Counter(
        entry.target for entry in store.audit_log(limit=10**6) if entry.action == "submit"
    )
    assert submits == Counter(stored), "a stored job without its one audit entry, or the reverse"


def check_no_gpu_is_booked_twice(store: SqlStore) -> None:
    """Over the jobs that hold capacity, no node gives out more GPUs than it has."""
    capacity = {node.name: node.allocatable.amount(NVIDIA_GPU) for node in store.nodes()}
    booked: Counter[str] = Counter()
    for job in store.jobs().values():
        assert (job.allocation is not None) == job.phase.holds_capacity, (job.id, job.phase)
        if job.allocation is not None:
            for node, resources in job.allocation.resources_on_node.items():
                booked[node] += resources.amount(NVIDIA_GPU)
    overbooked = {node: gpus for node, gpus in booked.items() if gpus > capacity[node]}
    assert overbooked == {}, f"GPUs booked past capacity: {overbooked}"


def check_pods_match_the_store(store: SqlStore, run_id: str) -> None:
    """A pod alive runs for a job that holds capacity on the pod's node, one attempt per job,
    and pods on one node share no GPU — except pods being stopped (a job just cancelled or
    preempted), which must be gone within the stop grace period."""
    jobs = store.jobs(include_finished=True)

    def wrong(pod: Pod) -> bool:
        job = jobs.get(pod.job)
        return (
            job is None
            or job.allocation is None
            or not job.phase.holds_capacity
            or pod.node not in job.allocation.nodes
        )

    stray = [pod for pod in live_pods(run_id) if wrong(pod)]
    still = wait_until_gone(run_id, stray, STOP_GRACE_S + 2)
    assert still == [], "pods of jobs that hold nothing"
    pods = [pod for pod in live_pods(run_id) if not wrong(pod)]
    attempts = Counter((pod.job, pod.attempt) for pod in pods)
    assert len({job for job, _ in attempts}) == len(attempts), "two attempts of a job alive"
    on_node = Counter((pod.node, gpu) for pod in pods for gpu in pod.gpus)
    assert [key for key, count in on_node.items() if count > 1] == []
    phases = {jobs[pod.job].phase for pod in pods}
    assert phases <= {JobPhase.ADMITTED, JobPhase.RUNNING}


def check_the_api_agrees(server: ServerProcess) -> None:
    headers = {"Authorization": f"Bearer {server.token()}"}
    with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=10) as http:
        for node in http.get("/nodes").json():
            assert node["gpusUsed"] <= node["gpus"], node
        running = _ids(http, JobPhase.RUNNING)
        pending = _ids(http, JobPhase.PENDING)
    assert running & pending == set(), "a job listed as running and as pending"


def _ids(http: httpx.Client, phase: JobPhase) -> set[str]:
    page = http.get("/jobs", params={"phase": phase.value, "limit": 1000}).json()
    return {row["id"] for row in page["items"]}


def wait_until_gone(run_id: str, pods: list[Pod], timeout_s: float = GONE_DEADLINE_S) -> list[Pod]:
    """The pods still alive (same pid, same job) after ``timeout_s`` at most."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = {(pod.pid, pod.job) for pod in live_pods(run_id)} if pods else set()
        remaining = [pod for pod in pods if (pod.pid, pod.job) in alive]
        if not remaining or time.monotonic() > deadline:
            return remaining
        time.sleep(0.05)
