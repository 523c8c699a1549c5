"""The controller-step benchmark keeps working: a 64-node run of today's code on the real
SQLite store, in a child process as the runner makes it (it sets the process's garbage
collection as the server does), that fills the cluster and then runs steady steps (timings
are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

from benchmarks.controller_step import PHASES, run_child, table


def test_a_tiny_run_fills_the_cluster_then_steps_and_is_tabled() -> None:
    measured = run_child("today", None, 64, 100, 3)
    assert measured.admitted > 0 and measured.fill_steps >= 2
    assert len(measured.wall_s) == 3 and set(measured.phase_wall_s) == set(PHASES)
    assert measured.peak_rss_mib > 0
    printed = table([measured], markdown=True)
    assert "| today | step |" in printed and "| today | commit |" in printed


def test_steps_after_submissions_run_too() -> None:
    """``--after submit``: each steady step follows one job submitted alike a waiting one."""
    measured = run_child("today", None, 64, 100, 3, "submit")
    assert len(measured.wall_s) == 3 and measured.admitted > 0
