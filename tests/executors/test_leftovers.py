"""Pods a crashed control plane left behind are stopped by the next executor, also when the
crash came between spawning a pod and recording its pid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from topoq.executors.processes import record_pids, stop_leftovers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _pod(directory: Path, job: str) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    environment = os.environ | {"TOPOQ_JOB_ID": job}
    return subprocess.Popen(SLEEPER, cwd=directory, env=environment, start_new_session=True)


def _ended(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_pod_whose_pid_was_never_recorded_is_found_by_its_directory(tmp_path: Path) -> None:
    unrecorded = _pod(tmp_path / "runs" / "t" / "job-a" / "1", "job-a")
    recorded = _pod(tmp_path / "runs" / "t" / "job-b" / "1", "job-b")
    record_pids(tmp_path / "runs" / "t" / "job-b" / "1", "job-b", [recorded.pid])
    elsewhere = _pod(tmp_path / "other", "job-c")
    try:
        time.sleep(0.2)  # let the children exec, so /proc shows their environment
        killed = stop_leftovers(tmp_path / "runs")
        assert {unrecorded.pid, recorded.pid} <= set(killed)
        assert _ended(unrecorded) and _ended(recorded)
        assert elsewhere.poll() is None, "a process outside the work directory was killed"
    finally:
        for process in (unrecorded, recorded, elsewhere):
            process.kill()
            process.wait()
