"""A real ``topoq`` server process for the API benchmark: its cluster and policy, starting and
stopping it, its memory and CPU time (from ``/proc``), and jobs stored in bulk before it starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from topoq.domain.governance import TeamName
from topoq.domain.job import JobId, JobPhase, JobSpec
from topoq.executors.local.processes import free_port
from topoq.store import open_store
from topoq.store.codec import encode_job_spec
from topoq.store.schema import JobEventRow, JobRow
from topoq.testing.builders import gpu_pods, workload
from topoq.testing.server import api_process_ids

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 60.0
TEAMS = ("nlp", "vision")
CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata: {name: api-benchmark}
levels:
  - topology.k8s.aws/network-node-layer-1
  - topology.k8s.aws/network-node-layer-2
  - topology.k8s.aws/network-node-layer-3
  - kubernetes.io/hostname
generate: {shape: [1, 2, 2, 2], instance_type: ml.p5.48xlarge, name_prefix: p5-}
"""
POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: api-benchmark}
teams:
- name: nlp
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
- name: vision
  quotas: [{flavor: ml.p5.48xlarge, instances: 4}]
"""
POD_SLEEP_S = "3600"
"""Admitted benchmark jobs run the default pod, sleeping (not churning processes)."""


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    token: str

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def pids(self) -> list[int]:
        """The controller process and its API processes (not the pods: they sleep)."""
        return [self.process.pid, *api_process_ids(self.process.pid)]

    def rss_mib(self) -> float:
        """Resident memory of the controller and API processes together."""
        return sum(_status_kib(pid, "VmRSS") for pid in self.pids()) / 1024

    def peak_rss_mib(self) -> float:
        return sum(_status_kib(pid, "VmHWM") for pid in self.pids()) / 1024

    def cpu_s(self) -> float:
        """User + system CPU time of the controller and API processes so far."""
        return sum(cpu_s(pid) for pid in self.pids())

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read()) if path != "/metrics" else response.read().decode()

    def cycles(self) -> float:
        """How many controller steps have been measured (``/metrics``)."""
        for line in self.get("/metrics").splitlines():
            if line.startswith("topoq_cycle_duration_seconds_count"):
                return float(line.split()[-1])
        return 0.0

    def wait_for_cycle(self, timeout_s: float = 60.0) -> None:
        """Until a controller step that began after this call has ended."""
        seen = self.cycles()
        deadline = time.monotonic() + timeout_s
        while self.cycles() < seen + 2 and time.monotonic() < deadline:
            time.sleep(0.05)


def write_inputs(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cluster, policy = directory / "cluster.yaml", directory / "policy.yaml"
    cluster.write_text(CLUSTER)
    policy.write_text(POLICY)
    return cluster, policy


@contextlib.contextmanager
def running_server(
    data_dir: Path, database_url: str | None, options: Sequence[str] = ()
) -> Iterator[RunningServer]:
    """``python -m topoq.bootstrap`` on a free port until the block ends (then SIGTERM)."""
    cluster, policy = write_inputs(data_dir / "inputs")
    port = free_port()
    command = [
        sys.executable, "-m", "topoq.bootstrap", "--host", HOST, "--port", str(port),
        "--data-dir", str(data_dir), "--cluster", str(cluster), "--policy", str(policy),
    ]  # fmt: skip
    command += options
    environment = os.environ | {"TOPOQ_SLEEP_S": POD_SLEEP_S}
    if database_url is not None:  # through the environment: a password stays off argv
        environment["TOPOQ_DATABASE_URL"] = database_url
    with (data_dir / "server.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    try:
        _wait_until_healthy(process, port, data_dir)
        token = (data_dir / "admin-token").read_text().strip()
        yield RunningServer(process, port, data_dir, token)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_healthy(process: subprocess.Popen[bytes], port: int, data_dir: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {(data_dir / 'server.log').read_text()}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=1) as answer,
        ):
            if answer.status == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the server did not start: {(data_dir / 'server.log').read_text()}")


def _status_kib(pid: int, key: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # it has just exited
        return 0
    for line in lines:
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU time of one process so far (0 when it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- jobs stored in bulk -------------------------------------------------------------------
CHUNK = 5_000
FINISHED_HISTORY = (
    (JobPhase.PENDING, "submitted"),
    (JobPhase.ADMITTED, "admitted"),
    (JobPhase.RUNNING, "started"),
    (JobPhase.SUCCEEDED, "every pod exited 0"),
)


def store_jobs(data_dir: Path, database_url: str | None, count: int, pending: int) -> None:
    """Insert ``count`` jobs straight into the store (not timed): the newest ``pending`` wait,
    the others have succeeded (phase history of four entries each)."""
    store = open_store(database_url, data_dir)
    template = JobSpec(
        id=JobId("template"),
        team=TeamName(TEAMS[0]),
        workload=workload(gpu_pods(1, gpus=8)),
        submitted_at=0.0,
    )
    spec = encode_job_spec(template)
    try:
        with store.database.writer.begin() as connection:
            for first in range(0, count, CHUNK):
                numbers = range(first, min(first + CHUNK, count))
                jobs, events = [], []
                for number in numbers:
                    waiting = number >= count - pending
                    job, history = _job_rows(spec, number, waiting)
                    jobs.append(job)
                    events.extend(history)
                connection.execute(insert(JobRow), jobs)
                connection.execute(insert(JobEventRow), events)
    finally:
        store.close()


def _job_rows(
    spec: dict[str, Any], number: int, waiting: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job_id, team, at = f"stored-{number:06d}", TEAMS[number % 2], 1_000_000.0 + number
    history = FINISHED_HISTORY[:1] if waiting else FINISHED_HISTORY
    job = {
        "id": job_id, "team": team, "user_name": "bench", "phase": history[-1][0].value,
        "priority_class": None, "submitted_at": at, "held": False, "failures": 0,
        "preemptions": 0, "attempt": 0 if waiting else 1, "history_length": len(history),
        "spec": spec | {"id": job_id, "team": team, "submitted_at": at}, "allocation": None,
        "diagnostic": None, "admitted_at": None if waiting else at + 1,
        "started_at": None if waiting else at + 2, "updated_at": at + 3, "version": 1,
    }  # fmt: skip
    events = [
        {"job_id": job_id, "seq": seq, "team": team, "at": at + seq, "phase": phase.value,
         "cause": cause, "allocation": None}
        for seq, (phase, cause) in enumerate(history)
    ]  # fmt: skip
    return job, events
