"""The CLI's time options and ETAs: ``--time`` read as a duration; the ETA shown as
``in 12m``, ``now`` when due, ``-`` when unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.cli.server_commands import eta_text, jobs_table, submission
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobPhase
from topoq.wire.v1 import JobSummary


def test_eta_text_is_relative_to_now() -> None:
    assert eta_text(None) == "-"
    assert eta_text(1000 + 720, now=1000) == "in 12m"
    assert eta_text(1000 + 5400, now=1000) == "in 1h30m"
    assert eta_text(999, now=1000) == "now"


def test_the_job_list_has_an_eta_column() -> None:
    rows = [
        JobSummary(
            id="gang", team="a", phase=JobPhase.PENDING, gpus=64, reason="WAITING", eta_at=4e9
        )
    ]
    header, _, line = jobs_table(rows).splitlines()[:3]
    assert "ETA" in header and "in " in line and "WAITING" in line


def test_submit_time_is_read_as_a_duration_and_a_bad_one_names_the_option(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: topoq.io/v1\nkind: Job\nmetadata: {name: j}\n"
        "spec: {podSets: [{name: w, count: 1, requests: {nvidia.com/gpu: 8}}]}\n"
    )
    assert submission(job, None, None, None, None, None, {}, "2h").time_limit_s == 7200
    assert submission(job, None, None, None, None, None, {}).time_limit_s is None
    with pytest.raises(InvalidInputError) as refused:
        submission(job, None, None, None, None, None, {}, "soon")
    assert refused.value.where == "--time" and "2h" in (refused.value.hint or "")
