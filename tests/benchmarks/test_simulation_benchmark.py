"""The simulation benchmark keeps working: the first minute of fair-share-at-scale on today's code
and on the baseline revision extracted with git, each in its own process, deciding the same
(timings are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.cycle import REPO, extract
from benchmarks.simulation import (
    BASELINE_REVISION,
    OWN_SHELL_REVISION,
    SCENARIO,
    TRACE_BASELINE,
    TraceRun,
    run_child,
    table,
    verdicts,
)


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is extracted with git")
def test_today_and_the_baseline_simulate_the_same_and_are_tabled(tmp_path: Path) -> None:
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse"], check=False).returncode == 0
    if not inside:
        pytest.skip("not a git checkout")
    baseline = run_child("base", extract(BASELINE_REVISION, tmp_path), SCENARIO, 60.0)
    today = run_child("today", None, SCENARIO, 60.0)
    assert (today.jobs, today.simulated_s) == (39, 60.0)  # three jobs at 0, 5, ..., 60 s
    assert today.cycles > 0 and 0 < today.schedule_s <= today.total_s
    assert baseline.log_digest == today.log_digest
    printed = table([baseline, today], markdown=True)
    assert "| base | 60 s | 39 |" in printed and "| today | 60 s | 39 |" in printed
    assert verdicts([baseline, today])[0].startswith("the same log as base")


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is extracted with git")
def test_a_trace_replayed_by_today_and_by_the_first_trace_reader_decides_the_same(
    tmp_path: Path,
) -> None:
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse"], check=False).returncode == 0
    if not inside:
        pytest.skip("not a git checkout")
    sample = REPO / "tests" / "sim" / "traces" / "itp-sample.csv"
    trace = TraceRun(limit=30, nodes=32)
    baseline = run_child("base", extract(TRACE_BASELINE, tmp_path), sample, None, trace)
    today = run_child("today", None, sample, None, trace)
    assert today.jobs == baseline.jobs == 30 and today.log_digest == baseline.log_digest
    assert "target:" in verdicts([baseline, today], trace)[1]


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is extracted with git")
def test_today_through_the_controller_logs_what_the_simulators_own_shell_logged(
    tmp_path: Path,
) -> None:
    """Today's simulator runs the server's controller; the last revision with a shell of its
    own decides the same on fair-share-at-scale's first minute."""
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse"], check=False).returncode == 0
    if not inside:
        pytest.skip("not a git checkout")
    own = run_child("own", extract(OWN_SHELL_REVISION, tmp_path), SCENARIO, 60.0)
    today = run_child("today", None, SCENARIO, 60.0)
    assert (today.jobs, today.simulated_s) == (own.jobs, own.simulated_s)
    assert today.log_digest == own.log_digest
    assert 0 < today.schedule_s <= today.total_s
    assert verdicts([own, today])[0].startswith("the same log as own")
