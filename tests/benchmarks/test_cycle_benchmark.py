"""The cycle benchmark keeps working: a 64-node run of today's code and of a baseline revision
extracted with git, each in its own process, on the same seeded workload (timings are not
checked: benchmarks are not timed tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.cycle import (
    BASELINE_REVISION,
    GC_YOUNG_THRESHOLD,
    REPO,
    extract,
    ratios,
    run_child,
    table,
)
from topoq.server.loop import GC_YOUNG_THRESHOLD as CONTROLLERS


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is extracted with git")
def test_today_and_a_baseline_run_the_same_workload_and_are_tabled(tmp_path: Path) -> None:
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse"], check=False).returncode == 0
    if not inside:
        pytest.skip("not a git checkout")
    baseline = run_child("base", extract(BASELINE_REVISION, tmp_path), 64, 200, 3)
    today = run_child("today", None, 64, 200, 3)
    assert today.cold_admitted > 0 and today.peak_rss_mib > 0
    # a faster cycle decides what the baseline decided
    assert (baseline.cold_admitted, baseline.one_ended_admitted) == (
        today.cold_admitted,
        today.one_ended_admitted,
    )
    printed = table([baseline, today], markdown=True)
    assert "| base | 64 | 200 |" in printed and "| today | 64 | 200 |" in printed
    assert ratios([baseline, today])[0].startswith("64 nodes x 200 pending")


def test_the_benchmark_collects_garbage_as_the_controller_does() -> None:
    assert GC_YOUNG_THRESHOLD == CONTROLLERS
