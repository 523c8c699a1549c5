"""The quota arithmetic benchmark keeps working: a 64-node run of today's code and of the
baseline revision extracted with git, each in its own process, tabled per operation (timings
are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.cycle import REPO, extract
from benchmarks.quota_arithmetic import BASELINE_REVISION, OPERATIONS, run_child, table


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is extracted with git")
def test_today_and_the_baseline_time_every_operation_and_are_tabled(tmp_path: Path) -> None:
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse"], check=False).returncode == 0
    if not inside:
        pytest.skip("not a git checkout")
    baseline = run_child(extract(BASELINE_REVISION, tmp_path), 64)
    today = run_child(None, 64)
    assert set(baseline) == set(today) == set(OPERATIONS)
    assert all(value > 0 for value in today.values())
    printed = table("base", [(64, baseline, today)])
    assert all(operation in printed for operation in OPERATIONS)
    assert "ledger, one ended" in printed and "x" in printed
