"""``benchmarks.topology_worth`` on the ITP sample, so that the runner cannot rot: every mode
replays every job, and topoq places each multi-node gang as tight as the free capacity
allowed while first fit does not."""

from __future__ import annotations

from benchmarks.topology_worth import replay, table
from tests.sim.test_traces import ITP
from topoq.core.cycle import PlacementMode


def test_the_runner_compares_every_placement_on_the_same_arrivals() -> None:
    rows = [replay(ITP, 40, "2x2x16", mode) for mode in PlacementMode]
    assert all(row.figures.completed == row.figures.jobs == 40 for row in rows)
    by_mode = {row.mode: row.figures for row in rows}
    assert by_mode[PlacementMode.TOPOQ].at_best_span == 1.0
    first_fit = by_mode[PlacementMode.FIRST_FIT].at_best_span
    assert first_fit is not None and first_fit < 1.0
    shown = table(rows, markdown=True).splitlines()
    assert len(shown) == 2 + 3 and all("1.000x" in line for line in shown if "first-fit" in line)
