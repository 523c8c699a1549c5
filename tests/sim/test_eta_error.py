"""The ETA error of a run: the first ETA each job was given against its actual start."""

from __future__ import annotations

from topoq.domain.governance import TeamName
from topoq.domain.job import JobId
from topoq.sim import Decision, LogEntry
from topoq.sim.eta_error import EtaError, eta_error

A = TeamName("a")


def wait(t: float, job: str, eta: float | None) -> LogEntry:
    return LogEntry(t, Decision.WAIT, JobId(job), A, "TOPOLOGY_UNSATISFIABLE", eta=eta)


def start(t: float, job: str) -> LogEntry:
    return LogEntry(t, Decision.START, JobId(job), A)


def test_the_first_eta_counts_and_jobs_without_one_do_not() -> None:
    entries = [
        wait(0, "x", 100),
        wait(50, "x", 300),  # a later ETA is not what the job was first told
        wait(0, "y", 200),
        wait(0, "z", None),
        start(150, "y"),
        start(160, "x"),
        start(10, "z"),
    ]
    error = eta_error(entries)
    assert error == EtaError(jobs=2, mean_abs_s=55.0, p90_abs_s=60.0, mean_s=5.0)
    assert eta_error([]).jobs == 0


def test_a_wait_entry_carries_its_eta_in_the_log_line() -> None:
    assert wait(0, "x", 120).document()["eta"] == 120
    assert "eta" not in wait(0, "x", None).document()
