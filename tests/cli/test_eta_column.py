"""The ETA as the CLI shows it: ``in 12m``, ``now`` when due, ``-`` when unknown."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from topoq.cli.server_commands import eta_text, jobs_table
from topoq.domain.job import JobPhase
from topoq.wire.v1 import JobSummary


def test_eta_text_is_relative_to_now() -> None:
    assert eta_text(None) == "-"
    assert eta_text(1000 + 720, now=1000) == "in 12m"
    assert eta_text(1000 + 5400, now=1000) == "in 1h30m"
    assert eta_text(999, now=1000) == "now"


def test_the_job_list_has_an_eta_column() -> None:
    rows = [JobSummary(id="gang", team="a", phase=JobPhase.PENDING, gpus=64)]
    out = StringIO()
    Console(file=out, width=200).print(jobs_table(rows, {"gang": "WAITING"}, {"gang": 4e9}))
    header, line = out.getvalue().splitlines()[:2]
    assert "ETA" in header and "in " in line and "WAITING" in line
