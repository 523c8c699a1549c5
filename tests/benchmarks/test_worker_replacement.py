"""The worker-replacement benchmark keeps working: one kill with the spare, whose gap is
measured (timings are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.worker_replacement import measure, table


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the API processes in /proc")
def test_a_kill_is_measured_and_tabled() -> None:
    result = measure(spares=1, kills=1, clients=2)
    assert len(result.gaps_s) == 1 and result.missed == 0
    assert "| 1 | 1 |" in table([result], markdown=True)
