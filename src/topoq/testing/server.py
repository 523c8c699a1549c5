"""Helpers for tests and benchmarks that drive a real ``topoq server``: the server process
itself on a free port (``running_server``), a submission body that takes one whole node, and
the server's API processes as the kernel lists them (all of them, those serving, and the
warmed spares, told apart by the name each gives itself, ``/proc/<pid>/comm``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from topoq.api_workers import SERVING_NAME, SPARE_NAME
from topoq.executors.local.processes import free_port

STARTUP_TIMEOUT_S = 90.0
"""A server answers in a few seconds; CI saw one take over 30 s with both cores busy."""
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class RunningServer:
    url: str
    """``http://127.0.0.1:PORT`` (the API is under ``/api/v1``)."""
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    """The server's output, beside the data directory (so that it is not one of its files)."""
    stderr_path: Path | None = None
    """With ``separate_stderr``: the server's log (stderr) alone; ``log_path`` has stdout."""

    def log_lines(self) -> list[str]:
        """The lines of the server's log so far (stderr, else all its output)."""
        path = self.stderr_path or self.log_path
        return path.read_text(encoding="utf-8", errors="replace").splitlines()


@contextlib.contextmanager
def running_server(
    data_dir: Path,
    *options: str,
    cluster: Path | None = None,
    policy: Path | None = None,
    environment: Mapping[str, str] | None = None,
    through_cli: bool = False,
    separate_stderr: bool = False,
) -> Iterator[RunningServer]:
    """``python -m topoq.bootstrap`` (or ``topoq server`` when ``through_cli``) on a free
    port, healthy when it is yielded, stopped with SIGTERM (SIGKILL if it lingers) after.
    ``separate_stderr``: the log (stderr) goes to a file of its own (``stderr_path``)."""
    port = free_port()
    program = ["-m", "topoq", "server"] if through_cli else ["-m", "topoq.bootstrap"]
    command = [sys.executable, *program, "--port", str(port), "--data-dir", str(data_dir)]
    command += ["--cluster", str(cluster)] if cluster is not None else []
    command += ["--policy", str(policy)] if policy is not None else []
    log_path = data_dir.with_name(f"{data_dir.name}.server.log")
    stderr_path = data_dir.with_name(f"{data_dir.name}.server.stderr") if separate_stderr else None
    with log_path.open("wb") as log, contextlib.ExitStack() as files:
        errors = files.enter_context(stderr_path.open("wb")) if stderr_path else subprocess.STDOUT
        process = subprocess.Popen(
            [*command, *options],
            stdout=log,
            stderr=errors,
            env=dict(os.environ if environment is None else environment),
        )
        server = RunningServer(f"http://127.0.0.1:{port}", data_dir, process, log_path, stderr_path)
        try:
            wait_until_healthy(server.url, process, stderr_path or log_path)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_healthy(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Return once the server at ``url`` answers ``/healthz``; raise with its output (from
    ``log_path``) when it exits or does not answer within ``STARTUP_TIMEOUT_S``."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited:\n{_text(log_path)}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise AssertionError(f"the server did not start:\n{_text(log_path)}")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def whole_node_submission(
    job_id: str, team: str, pods: int = 1, **topology: str
) -> dict[str, object]:
    """A ``POST /jobs`` body: ``pods`` pods of 8 GPUs (a whole node each) for ``team``, with
    the pod set's ``topology`` (``required=LEVEL``, ``preferred=LEVEL``) if given."""
    return submission(job_id, team, pods, {"nvidia.com/gpu": 8}, **topology)


def submission(
    job_id: str, team: str, pods: int, requests: Mapping[str, object], **topology: str
) -> dict[str, object]:
    """A ``POST /jobs`` body: ``pods`` pods asking for ``requests`` each, for ``team``."""
    pod_set: dict[str, object] = {"name": "w", "count": pods, "requests": dict(requests)}
    if topology:
        pod_set["topology"] = topology
    return {
        "format": "topoq",
        "team": team,
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": job_id},
            "spec": {"podSets": [pod_set]},
        },
    }


def serving_api_process_ids(server_pid: int) -> list[int]:
    """The server's API processes that serve requests now."""
    return [pid for pid in api_process_ids(server_pid) if _name(pid) == SERVING_NAME]


def spare_api_process_ids(server_pid: int) -> list[int]:
    """The server's warmed spare API processes, waiting to replace one that dies."""
    return [pid for pid in api_process_ids(server_pid) if _name(pid) == SPARE_NAME]


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def api_process_ids(server_pid: int) -> list[int]:
    """The server's API processes, serving, spare or starting: its children started with
    ``--api-process`` (Linux)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{server_pid}/task").iterdir())
    except OSError:  # the server itself has just exited
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended between listing and reading
            continue
        for child in children:
            with contextlib.suppress(OSError):
                arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"--api-process" in arguments:
                    found.append(int(child))
    return found
