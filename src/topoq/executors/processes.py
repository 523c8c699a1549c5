"""OS processes for pods: spawned in their own session (so a pod's whole process tree can be
signalled at once), stopped with SIGTERM then SIGKILL, and reaped without blocking."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from topoq.executors.layout import open_private, write_private_text

SIGNAL_EXIT_BASE = 128
"""A pod killed by signal N reports exit code 128 + N, as shells and Kubernetes do."""


def spawn(
    argv: Sequence[str], *, environment: Mapping[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session, stdout and stderr into ``log_path``
    (private, opened for appending so that a rotation's truncation leaves no hole)."""
    log_descriptor = open_private(log_path, os.O_WRONLY | os.O_APPEND | os.O_TRUNC)
    with os.fdopen(log_descriptor, "wb") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(environment),
            start_new_session=True,
        )


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def exit_code(returncode: int) -> int:
    """Popen's return code as a shell reports it (a signal N becomes 128 + N)."""
    return SIGNAL_EXIT_BASE - returncode if returncode < 0 else returncode


def has_exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the process ended, without reaping it (its pid stays reserved until reaped)."""
    if process.returncode is not None:
        return True
    try:
        status = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return status is not None


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the pod's whole process group (the leader's pid is its id)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def reap(process: subprocess.Popen[bytes]) -> int:
    """The exit code of an ended pod. Kills what is left of its process group first, while the
    unreaped leader still reserves the group's id."""
    signal_group(process, signal.SIGKILL)
    return exit_code(process.wait())


@dataclass
class _Stopping:
    process: subprocess.Popen[bytes]
    kill_at: float


class Terminations:
    """Pods being stopped: SIGTERM first, SIGKILL for those still running after the grace
    period. ``advance`` never blocks; ``finish`` waits until every one is gone."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._stopping: list[_Stopping] = []

    def begin(self, processes: Sequence[subprocess.Popen[bytes]]) -> None:
        kill_at = time.monotonic() + self.grace_s
        for process in processes:
            signal_group(process, signal.SIGTERM)
            self._stopping.append(_Stopping(process, kill_at))

    def kill_now(self, processes: Sequence[subprocess.Popen[bytes]]) -> None:
        """SIGKILL the processes' groups and wait until they are gone."""
        for process in processes:
            signal_group(process, signal.SIGKILL)
            self._stopping.append(_Stopping(process, time.monotonic()))
        self.finish()

    def advance(self) -> None:
        """Reap the pods that ended; SIGKILL those past their grace period."""
        now = time.monotonic()
        still: list[_Stopping] = []
        for entry in self._stopping:
            if has_exited(entry.process):
                reap(entry.process)
                continue
            if now >= entry.kill_at:
                signal_group(entry.process, signal.SIGKILL)
            still.append(entry)
        self._stopping = still

    def finish(self, poll_interval_s: float = 0.01) -> None:
        """Block until every pod being stopped is gone (at most the grace period and a bit)."""
        while self._stopping:
            self.advance()
            if self._stopping:
                time.sleep(poll_interval_s)

    def __len__(self) -> int:
        return len(self._stopping)


LEFTOVERS = "pids.json"
"""Beside each running attempt's logs: the process ids of its pods, so that pods that outlived
a crashed control plane can be found and stopped when the next executor starts."""


def record_pids(directory: Path, job: str, pids: Sequence[int]) -> None:
    write_private_text(directory / LEFTOVERS, json.dumps({"job": job, "pids": list(pids)}) + "\n")


def forget_pids(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / LEFTOVERS).unlink()


def stop_leftovers(work_dir: Path) -> list[int]:
    """Kill the process groups of pods a previous executor left running in ``work_dir`` (after
    a crash), so a requeued gang is never running twice. A pid is only killed when its
    environment still names the job, so a reused pid is left alone. Then every other process
    still working in an attempt directory of ``work_dir`` with a pod's environment is killed
    too: pods of a crash between their spawn and ``record_pids``. Returns the pids killed."""
    killed = _stop_recorded(work_dir)
    # a pod killed just above may still be in /proc (a zombie until its parent reaps it)
    return killed + [pid for pid in _stop_working_in(work_dir) if pid not in killed]


def _stop_recorded(work_dir: Path) -> list[int]:
    killed: list[int] = []
    for record in sorted(work_dir.glob(f"*/*/*/{LEFTOVERS}")):
        try:
            entry = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        for pid in entry.get("pids", []):
            if _runs_job(int(pid), str(entry.get("job", ""))):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(pid), signal.SIGKILL)
                    killed.append(int(pid))
        record.unlink(missing_ok=True)
    return killed


def _stop_working_in(work_dir: Path) -> list[int]:
    """Kill the processes (Linux ``/proc``) whose working directory is under ``work_dir`` and
    whose environment names a job (``TOPOQ_JOB_ID``), as every pod's does."""
    root, killed = work_dir.resolve(), []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            working = Path(os.readlink(entry / "cwd"))
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        pid = int(entry.name)
        is_pod = any(variable.startswith(b"TOPOQ_JOB_ID=") for variable in environ)
        if pid != os.getpid() and is_pod and working.is_relative_to(root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def _runs_job(pid: int, job: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"TOPOQ_JOB_ID={job}".encode() in environ.split(b"\0")
