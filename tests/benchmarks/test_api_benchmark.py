"""The API benchmark runner keeps working: a tiny quick run on SQLite in which every request
succeeds (timings are not checked: benchmarks are not timed tests)."""

from __future__ import annotations

import pytest

from benchmarks.api import Report, Scale, main, run

TINY = Scale(requests=40, clients=5, rates_per_s=(100,), stored_jobs=300, stored_pending=20)


@pytest.fixture(scope="module")
def report() -> Report:
    return run(["sqlite"], TINY)


def test_every_request_of_every_row_succeeded(report: Report) -> None:
    routes = {(row.route, row.mode.split()[0]) for row in report.rows}
    assert ("POST /jobs", "saturated") in routes and ("POST /jobs", "paced") in routes
    assert ("GET /healthz", "baseline") in routes
    for row in report.rows:
        assert row.load.all_succeeded, (row.route, row.mode, row.load.statuses)
        assert len(row.load.latencies_ns) == TINY.requests


def test_memory_is_measured_with_the_stored_jobs(report: Report) -> None:
    (memory,) = report.memory
    assert memory.stored_jobs == TINY.stored_jobs
    assert memory.after_mib > 0 and memory.baseline_mib > 0


def test_main_prints_the_tables_and_the_target_line(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--requests", "10", "--clients", "2", "--rates", "50", "--stored-jobs", "50"]
    main(["--backend", "sqlite", *tiny])
    printed = capsys.readouterr().out
    assert "p99 ms" in printed and "RSS after list + cycle MiB" in printed
    assert "targets: not measured" in printed
