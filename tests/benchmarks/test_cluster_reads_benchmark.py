"""The cluster-reads benchmark runner keeps working: a tiny run on SQLite in which every
request of every row succeeds (timings are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

import pytest

from benchmarks.cluster_reads import ROUTES, Scale, main, run

TINY = Scale(pending=(300,), requests=10, clients=2, rate_per_s=100.0)


def test_every_route_gets_a_row_in_which_every_request_succeeded() -> None:
    rows = run(["sqlite"], TINY)
    assert [row.route for row in rows] == list(ROUTES)
    for row in rows:
        assert row.load.all_succeeded, (row.route, row.load.statuses)
        assert row.pending == 300 and row.baseline_p99_ms > 0


def test_main_prints_the_table_and_the_target_line(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--backend", "sqlite", "--pending", "50", "--requests", "5", "--rate", "50"])
    printed = capsys.readouterr().out
    assert "p99 ms" in printed and "GET /teams and GET /nodes at 50 pending" in printed
