"""The demo's server: ``python -m topoq.bootstrap`` as a child process (its own session, so a
Ctrl-C reaches the demo, which then stops it in order) with the embedded SQLite store and the
local executor (or the Kubernetes executor on a kubeconfig's cluster, or the Slurm executor on a
Slurm cluster), on a free localhost
port; its output goes to ``server.log`` in the data directory. Stopping it stops every pod;
pods it somehow left behind are killed too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

from topoq.domain.errors import TopoqError
from topoq.executors.local.leftovers import stop_leftovers
from topoq.server_environment import RUNS_DIRECTORY

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 20
KUBERNETES_DEMO_LEVELS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "kubernetes.io/hostname",
)
"""The demo cluster's levels (``data/demo/cluster.yaml``), as the nodes of a cluster carry them."""


class DemoServerError(TopoqError):
    """The demo server did not start (the message carries the end of its log)."""


class DemoServerRefused(TopoqError):
    """The demo server refused to start on bad input (a port in use, say): its one ``error:``
    line, which ``topoq demo`` ends with (exit 2) as any verb ends on bad input."""


REFUSED_EXIT_CODE = 2
"""What the server exits with when it refuses to start (``topoq.server.run.EXIT_BAD_INPUT``)."""


class DemoServer:
    def __init__(
        self,
        data_dir: Path,
        port: int,
        cluster_file: Path,
        policy_file: Path,
        kubeconfig: Path | None = None,
        slurm_conf: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.cluster_file = cluster_file
        self.policy_file = policy_file
        self.kubeconfig = kubeconfig
        """With one, the server runs the pods on that cluster (``--executor kubernetes``)."""
        self.slurm_conf = slurm_conf
        """With one, the server runs each gang as a Slurm job on that cluster (``--executor
        slurm``), its nodes labelled, and topology.conf written, from the cluster file."""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def token_path(self) -> Path:
        return self.data_dir / "admin-token"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def pods_dir(self) -> Path:
        return self.data_dir / RUNS_DIRECTORY

    def token(self) -> str:
        return self.token_path.read_text(encoding="utf-8").strip()

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Start the server and wait until it answers and has written its admin token."""
        command = [
            sys.executable, "-m", "topoq.bootstrap", "--host", HOST, "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--policy", str(self.policy_file),
        ]  # fmt: skip
        if self.slurm_conf is not None:
            command += ["--cluster", str(self.cluster_file), "--executor", "slurm"]
            command += ["--slurm-conf", str(self.slurm_conf), "--write-topology"]
        elif self.kubeconfig is None:
            command += ["--cluster", str(self.cluster_file)]
        else:
            levels = ",".join(KUBERNETES_DEMO_LEVELS)
            command += ["--executor", "kubernetes", "--kubeconfig", str(self.kubeconfig)]
            command += ["--topology-levels", levels]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self._wait_until_healthy(timeout_s)

    def _wait_until_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                refusal = self._refusal()
                if refusal is not None:
                    raise DemoServerRefused(refusal)
                raise DemoServerError(f"the demo server exited at start:\n{self.log_tail()}")
            if self.token_path.exists() and self._healthy():
                return
            time.sleep(0.1)
        raise DemoServerError(
            f"the demo server did not answer within {timeout_s:g} s:\n{self.log_tail()}"
        )

    def _refusal(self) -> str | None:
        """The server's ``error:`` line when it exited refusing to start, else None."""
        if self._process is None or self._process.poll() != REFUSED_EXIT_CODE:
            return None
        errors = [line for line in self.log_tail().splitlines() if line.startswith("error: ")]
        return errors[-1].removeprefix("error: ") if errors else None

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait(self) -> int | None:
        """Block until the server exits (``--keep-running``); its exit code."""
        return self._process.wait() if self._process is not None else None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
        """Stop the server (SIGTERM: it stops its pods and closes the store; SIGKILL if it
        hangs), then kill any pod left running. Returns the pids of pods left behind."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return stop_leftovers(self.pods_dir) if self.pods_dir.is_dir() else []

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])
