"""Pods a crashed control plane left behind are stopped by the next executor, also when the
crash came between spawning a pod and recording its pid, and wherever they moved; processes
of another executor, or without a pod's marker, are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from topoq.executors.local.layout import EXECUTOR_ID_FILE
from topoq.executors.local.leftovers import record_pids, stop_leftovers
from topoq.executors.local.process_table import MARKER_VARIABLE

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _process(cwd: Path, marker: str | None) -> subprocess.Popen[bytes]:
    cwd.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    if marker is not None:
        environment[MARKER_VARIABLE] = marker
    return subprocess.Popen(SLEEPER, cwd=cwd, env=environment, start_new_session=True)


def _ended(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_leftovers_are_found_by_record_and_by_marker_and_nothing_else(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / EXECUTOR_ID_FILE).write_text("ab" * 16 + "\n")
    mine = "ab" * 16 + "/t/job-a/1/"
    recorded = _process(runs / "t" / "job-b" / "1", mine.replace("job-a", "job-b") + "0")
    record_pids(runs / "t" / "job-b" / "1", "job-b", [recorded.pid])
    unrecorded_in_root = _process(Path("/"), mine + "0")
    other_executor = _process(runs / "t" / "job-a" / "1", "cd" * 16 + "/t/job-a/1/0")
    unmarked = _process(runs / "t" / "job-a" / "1", None)
    try:
        time.sleep(0.2)  # let the children exec, so /proc shows their environment
        killed = stop_leftovers(runs)
        assert {unrecorded_in_root.pid, recorded.pid} <= set(killed)
        assert _ended(unrecorded_in_root) and _ended(recorded)
        assert other_executor.poll() is None, "another executor's pod was killed"
        assert unmarked.poll() is None, "a process without a pod's marker was killed"
        assert not (runs / "t" / "job-b" / "1" / "pids.json").exists()
    finally:
        for process in (recorded, unrecorded_in_root, other_executor, unmarked):
            process.kill()
            process.wait()
