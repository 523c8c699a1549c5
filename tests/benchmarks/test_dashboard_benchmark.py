"""The dashboard benchmark keeps working: a 512-node run in Debian's chromium against the
real API, its table printed (timings are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.dashboard import CHROMIUM, measure, table


def test_the_dashboard_benchmark_paints_the_map_and_tables_it() -> None:
    if not Path(CHROMIUM).exists():
        message = f"the dashboard benchmark needs Debian's chromium at {CHROMIUM}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    measured = measure(512, 64, 100, repeat=1)
    assert (measured.running, measured.pending) == (64, 100)
    assert len(measured.first_paint_s) == 1 and measured.first_paint_s[0] > 0
    assert measured.nodes_drawn == 256  # one folded spine of two opened: its nodes drawn
    assert measured.downloaded_bytes > 10_000 and measured.files >= 8  # page, 5 modules, css, API
    assert 0 < measured.idle_bytes_per_s < 10_000  # polls the change mark, reads no view again
    assert len(measured.queue_paint_s) == 1 and measured.queue_first_s > 0
    printed = table(512, measured, markdown=True)
    assert "| 512 nodes, 64 running" in printed and "first paint / baseline" in printed
    assert "queue kept / baseline" in printed
