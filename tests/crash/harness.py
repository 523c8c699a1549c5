"""What the crash test drives: a real server process that can be SIGKILLed and restarted on the
same data directory, a client thread that keeps submitting, and the pods alive on this machine.

Every process of one test run (the server and, through the environment the local executor
passes on, every pod) carries ``RUN_MARKER`` with the run's id, so the test finds the pods of
every server generation by scanning ``/proc`` — also those a killed server left behind.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.api.conftest import CLUSTER_FILE, POLICY_FILE
from topoq.executors.local.processes import free_port
from topoq.testing.server import wait_until_healthy, whole_node_submission

RUN_MARKER = "TOPOQ_CRASH_TEST_RUN"
STARTUP_TIMEOUT_S = 90.0
"""A restart answers in a few seconds; CI saw one take over 30 s with both cores busy."""
RETRY_PAUSE_S = 0.05
REQUEST_TIMEOUT_S = 10.0


@dataclass
class ServerProcess:
    """``python -m topoq.bootstrap`` on a fixed port and data directory, restartable."""

    data_dir: Path
    run_id: str
    pod_sleep_s: float
    port: int = field(default_factory=free_port)
    cluster: Path = CLUSTER_FILE
    policy: Path = POLICY_FILE
    database_url: str | None = None
    options: tuple[str, ...] = ()
    """More options of the next ``start`` (``--keep-pods-on-exit``)."""
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [
            sys.executable, "-m", "topoq.bootstrap", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--cluster", str(self.cluster),
            "--policy", str(self.policy),
        ]  # fmt: skip
        if self.database_url is not None:
            command += ["--database", self.database_url]
        command += self.options
        environment = os.environ | {
            RUN_MARKER: self.run_id,
            "TOPOQ_SLEEP_S": str(self.pod_sleep_s),
        }
        self.starts += 1
        with (self.data_dir / f"server-{self.starts}.log").open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment
            )
        self._wait_until_healthy()

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, the pods it started are left running."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """A clean stop (SIGTERM, which stops the pods), SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def token(self) -> str:
        return (self.data_dir / "admin-token").read_text().strip()

    def _wait_until_healthy(self) -> None:
        assert self.process is not None
        wait_until_healthy(self.url, self.process, self.data_dir / f"server-{self.starts}.log")


@dataclass
class Submitter:
    """A client thread that submits jobs with unique ids, one after another. A submission that
    fails with a connection error (the server was killed) is retried with the same id until
    the server answers: a 409 then means the first try was stored, and it counts once."""

    url: str
    token: str
    pause_s: float
    acknowledged: list[str] = field(default_factory=list)
    answers: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="submitter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STARTUP_TIMEOUT_S + REQUEST_TIMEOUT_S)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=REQUEST_TIMEOUT_S) as http:
            for number in itertools.count():
                if self._stop.is_set():
                    return
                job_id = f"crash-{number:05d}"
                self._submit(http, job_id, ("nlp", "vision")[number % 2])
                self._stop.wait(self.pause_s)

    def _submit(self, http: httpx.Client, job_id: str, team: str) -> None:
        body = whole_node_submission(job_id, team)
        for attempt in itertools.count():
            try:
                status = http.post("/api/v1/jobs", json=body).status_code
            except httpx.TransportError:
                self.retries += 1
                time.sleep(RETRY_PAUSE_S)
                continue
            self.answers[status] += 1
            if status == 201 or (status == 409 and attempt > 0):
                self.acknowledged.append(job_id)
            return


@dataclass(frozen=True)
class Pod:
    pid: int
    job: str
    attempt: str
    node: str
    gpus: tuple[str, ...]


def live_pods(run_id: str) -> list[Pod]:
    """Every process of this run that is a pod (zombies, already dead, are left out)."""
    pods = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue
        variables = dict(
            item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
        )
        if variables.get(RUN_MARKER) == run_id and "TOPOQ_JOB_ID" in variables:
            devices = variables.get("CUDA_VISIBLE_DEVICES", "")
            pods.append(
                Pod(
                    pid=int(entry.name),
                    job=variables["TOPOQ_JOB_ID"],
                    attempt=variables.get("TOPOQ_ATTEMPT", ""),
                    node=variables.get("TOPOQ_NODE", ""),
                    gpus=tuple(gpu for gpu in devices.split(",") if gpu),
                )
            )
    return pods


def kill_pods(run_id: str) -> None:
    """Clean-up after the test: nothing of this run outlives it."""
    for pod in live_pods(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pod.pid, signal.SIGKILL)
