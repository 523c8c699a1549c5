"""A trace of one's own cluster in topoq's format (issue 14 §5's ``--trace-format topoq``,
docs/simulate.md): ``job_id,team,submitted_s,duration_s,gpus``, told by its header, read into
the jobs it names (ids and teams kept, arrivals counted from the first, whole GPUs or a share
of one), written back by ``write_trace`` as the same jobs, refused row by row with the file,
the line and what to write, and replayed by ``topoq simulate --trace`` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import topoq
from topoq.domain.errors import InvalidInputError
from topoq.sim.synthetic import SyntheticWorkload, synthetic_trace
from topoq.sim.traces import (
    TraceFormat,
    TraceJob,
    detect_format,
    read_trace,
    trace_scenario,
    write_trace,
)

HEADER = "job_id,team,submitted_s,duration_s,gpus"
MINE = f"""{HEADER}
train-1,nlp,1000,3600,16
train-2,vision,1010.5,1800,8
notebook-1,nlp,1020,600,0.5
eval-3,vision,1100,300,4
"""


def written(tmp_path: Path, text: str, name: str = "mine.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_topoq_trace_is_told_by_its_header_and_read_as_the_jobs_it_names(
    tmp_path: Path,
) -> None:
    path = written(tmp_path, MINE)
    assert detect_format(path) is TraceFormat.TOPOQ
    trace = read_trace(path)
    assert trace.format is TraceFormat.TOPOQ and trace.teams == ["nlp", "vision"]
    assert [(j.id, j.team, j.arrival_s, j.duration_s, j.gpus, j.gpu_milli) for j in trace.jobs] == [
        ("train-1", "nlp", 0.0, 3600.0, 16, 0),
        ("train-2", "vision", 10.5, 1800.0, 8, 0),
        ("notebook-1", "nlp", 20.0, 600.0, 1, 500),
        ("eval-3", "vision", 100.0, 300.0, 4, 0),
    ]
    assert trace.guarantees == {} and any("guaranteed nothing" in n for n in trace.notes)
    scenario = trace_scenario(trace)
    submitted = {event.action.spec.id: event.action.spec for event in scenario.events}
    assert set(submitted) == {"train-1", "train-2", "notebook-1", "eval-3"}
    assert submitted["train-1"].workload.gpus == 16 and submitted["notebook-1"].workload.gpus == 0.5


def test_what_write_trace_writes_reads_back_as_the_same_jobs(tmp_path: Path) -> None:
    drawn = synthetic_trace(
        SyntheticWorkload(
            jobs=200,
            mean_interval_s=37.3,
            sizes={1: 4.0, 8: 2.0, 16: 1.0},
            median_duration_s=900.0,
            teams={"nlp": 2.0, "vision": 1.0},
            seed=7,
        )
    )
    shares = tuple(
        TraceJob(f"share-{at}", "nlp", job.arrival_s + 0.25, 61.0, 1, 0, gpu_milli=250)
        for at, job in enumerate(drawn.jobs[:3])
    )
    for name in ("drawn.csv", "drawn.csv.gz"):
        path = tmp_path / name
        jobs = tuple(sorted((*drawn.jobs, *shares), key=lambda job: job.arrival_s))
        write_trace(type(drawn)(drawn.source, drawn.format, jobs), path)
        back = read_trace(path)
        assert back.format is TraceFormat.TOPOQ
        kept = [(j.id, j.team, j.arrival_s, j.duration_s, j.gpus, j.gpu_milli) for j in back.jobs]
        first = jobs[0].arrival_s
        assert kept == [
            (j.id, j.team, j.arrival_s - first, j.duration_s, j.gpus, j.gpu_milli) for j in jobs
        ]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("a,nlp,1,1", "4 fields where 5 were expected"),
        ("Big_Job,nlp,1,1,1", "'Big_Job' is not a valid job id"),
        ("train-1,nlp,2,1,1", "job_id 'train-1' is given twice (first on line 2)"),
        ("b,NLP team,1,1,1", "'NLP team' is not a valid team name"),
        ("b,nlp,soon,1,1", "submitted_s is 'soon'"),
        ("b,nlp,-5,1,1", "submitted_s is '-5'"),
        ("b,nlp,1,0,1", "duration_s is '0'"),
        ("b,nlp,1,inf,1", "duration_s is 'inf'"),
        ("b,nlp,1,1,0", "gpus is '0'"),
        ("b,nlp,1,1,1.5", "gpus is '1.5'"),
        ("b,nlp,1,1,0.0001", "gpus is '0.0001'"),
        ("b,nlp,1,1,1e30", "gpus is '1e30'"),
        ("b,nlp,1,1,two", "gpus is 'two'"),
    ],
)
def test_a_row_that_cannot_be_read_is_refused_with_its_line_and_what_to_write(
    tmp_path: Path, row: str, says: str
) -> None:
    path = written(tmp_path, f"{HEADER}\ntrain-1,nlp,0,60,1\n{row}\n")
    with pytest.raises(InvalidInputError) as raised:
        read_trace(path)
    assert says in raised.value.message
    assert str(raised.value.where).startswith(f"{path}:3") and raised.value.hint


def test_topoq_simulate_replays_a_topoq_trace_as_a_user_runs_it(tmp_path: Path) -> None:
    path = written(tmp_path, MINE)
    ran = topoq("simulate", "--trace", path, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    teams = {team["team"]: team for team in json.loads(ran.stdout)["summary"]["teams"]}
    assert {name: team["completed"] for name, team in teams.items()} == {"nlp": 2, "vision": 2}
    used = {
        name: team["gpu_hours_in_guarantee"] + team["gpu_hours_borrowed"]
        for name, team in teams.items()
    }
    assert used["nlp"] == pytest.approx(16 + 0.5 * 600 / 3600)
    assert "guaranteed nothing" in ran.stderr
    told = topoq("simulate", "--trace", path, "--trace-format", "topoq", "--limit", "2")
    assert told.returncode == 0, told.stderr
    bad = written(tmp_path, f"{HEADER}\na,nlp,1,1,1.5\n", "bad.csv")
    refused = topoq("simulate", "--trace", bad)
    assert refused.returncode == 2 and f"{bad}:2" in refused.stderr
    assert "gpus is '1.5'" in refused.stderr and "Traceback" not in refused.stderr
