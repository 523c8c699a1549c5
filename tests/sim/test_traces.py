"""Real traces as simulator input (``topoq.sim.traces``): Philly 2017 and Microsoft ITP 2021
samples (tests/sim/traces/README.md) read into arrivals, durations, GPU counts and teams,
turned into gangs of whole nodes on a cluster and policy derived from the trace, replayed
through the simulator with every GPU-second accounted for; rows that cannot be read refused
with the file, the line and what is wrong; and ``topoq simulate --trace`` as a user runs it."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from tests.cli.test_cli import topoq
from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import NVIDIA_GPU
from topoq.sim import engine
from topoq.sim.engine import Simulation
from topoq.sim.traces import (
    BLOCK_NODES,
    GPUS_PER_NODE,
    TraceFormat,
    TraceJob,
    derived_nodes,
    detect_format,
    gang_of,
    read_trace,
    trace_scenario,
)

SAMPLES = Path(__file__).parent / "traces"
PHILLY = SAMPLES / "philly-sample.csv"
ITP = SAMPLES / "itp-sample.csv"


def data_rows(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()[1:] if line.strip()]


def test_a_philly_trace_gives_its_vcs_as_teams_guaranteed_their_sizes() -> None:
    assert detect_format(PHILLY) is TraceFormat.PHILLY
    trace = read_trace(PHILLY)
    rows = data_rows(PHILLY)
    assert len(trace.jobs) == len(rows)
    assert [job.arrival_s for job in trace.jobs] == sorted(job.arrival_s for job in trace.jobs)
    assert trace.jobs[0].arrival_s == 0  # from the earliest arrival
    assert {job.team for job in trace.jobs} == {f"vc-{row[4]}" for row in rows}
    assert sorted(job.gpus for job in trace.jobs) == sorted(int(row[2]) for row in rows)
    assert trace.guarantees["vc-6214e9"] == 64 and len(trace.guarantees) == 11
    assert derived_nodes(trace) == sum(trace.guarantees.values()) == 352
    gzipped = read_trace(PHILLY.with_name("philly-sample.csv.gz"))
    assert gzipped.jobs == trace.jobs and gzipped.format is TraceFormat.PHILLY


def test_an_itp_trace_is_one_team_on_a_cluster_sized_to_its_demand() -> None:
    assert detect_format(ITP) is TraceFormat.ITP
    trace = read_trace(ITP)
    assert {job.team for job in trace.jobs} == {"itp"} and trace.guarantees == {}
    nodes = derived_nodes(trace)
    largest = max(job.gpus for job in trace.jobs)
    assert nodes % BLOCK_NODES == 0 and nodes * GPUS_PER_NODE >= largest
    end = max(job.arrival_s + job.duration_s for job in trace.jobs)
    demand = sum(job.gpus * job.duration_s for job in trace.jobs) / end
    assert (nodes - BLOCK_NODES) * GPUS_PER_NODE < max(demand, largest) <= nodes * GPUS_PER_NODE


def test_a_job_is_a_gang_of_whole_nodes_and_one_pod_of_the_rest() -> None:
    def shape(gpus: int) -> list[tuple[str, int, int]]:
        workload = gang_of(TraceJob("j", "t", 0, 60, gpus, 2))
        return [(s.name, s.count, s.requests.amount(NVIDIA_GPU)) for s in workload.pod_sets]

    assert shape(1) == [("rest", 1, 1)]
    assert shape(8) == [("workers", 1, 8)]
    assert shape(12) == [("workers", 1, 8), ("rest", 1, 4)]
    assert shape(64) == [("workers", 8, 8)]
    shares = [TraceJob("j", "t", 0, 60, gpus, 2).communication_share for gpus in (1, 8, 16, 128)]
    assert shares == [0.0, 0.0, 0.1, 0.2]


@pytest.mark.parametrize("path", [PHILLY, ITP], ids=["philly", "itp"])
def test_a_trace_replayed_runs_every_job_for_its_duration(path: Path) -> None:
    trace = read_trace(path)
    result = Simulation(trace_scenario(trace)).run()
    teams = result.summary.teams
    assert sum(team.completed for team in teams) == len(trace.jobs)
    held = sum(job.gpus * job.duration_s for job in trace.jobs) / 3600
    assert sum(team.gpu_hours for team in teams) == pytest.approx(held, rel=1e-6)
    assert result.summary.capacity_gpus >= derived_nodes(trace) * GPUS_PER_NODE


def test_only_the_first_jobs_by_arrival_with_a_limit() -> None:
    whole = read_trace(PHILLY)
    first = read_trace(PHILLY, limit=5)
    assert [job.line for job in first.jobs] == [job.line for job in whole.jobs[:5]]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("2017-10-09 07:01:55,66.0,1,66.0", "4 fields where 5 were expected"),
        ("2017-10-09 07:01:55,sixty,1,66.0,11cb48", "duration is 'sixty'"),
        ("2017-10-09 07:01:55,66.0,1.5,66.0,11cb48", "num_gpus is '1.5'"),
        ("2017-10-09 07:01:55,66.0,0,66.0,11cb48", "num_gpus is '0'"),
        ("2017-10-09 07:01:55,nan,1,66.0,11cb48", "duration is 'nan'"),
        ("09/10/2017 07:01,66.0,1,66.0,11cb48", "timestamp is '09/10/2017 07:01'"),
        ("2017-10-09 07:01:55,66.0,1,66.0,../x", "cluster is '../x'"),
    ],
)
def test_a_row_that_cannot_be_read_is_refused_with_its_line(
    tmp_path: Path, row: str, says: str
) -> None:
    lines = PHILLY.read_text().splitlines()
    lines[3] = row
    bad = tmp_path / "philly.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInputError) as raised:
        read_trace(bad)
    assert raised.value.where == f"{bad}:4" and says in raised.value.message
    assert raised.value.hint


def test_a_file_of_another_shape_is_refused_naming_the_formats(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="not one of a trace format") as raised:
        read_trace(SAMPLES / "philly_vc_nodes.csv")
    assert "timestamp,duration,num_gpus" in (raised.value.hint or "")
    with pytest.raises(InvalidInputError, match="not itp's"):
        read_trace(PHILLY, TraceFormat.ITP)
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(PHILLY.read_bytes())[:100])
    with pytest.raises(InvalidInputError, match="cannot be read"):
        read_trace(broken)
    empty = tmp_path / "empty.csv"
    empty.write_text(PHILLY.read_text().splitlines()[0] + "\n")
    with pytest.raises(InvalidInputError, match="no job"):
        read_trace(empty)


def test_topoq_simulate_replays_a_trace_as_a_user_runs_it(tmp_path: Path) -> None:
    copy = tmp_path / "philly.csv"
    shutil.copy(PHILLY, copy)  # no VC sizes beside it: every VC guaranteed nothing
    ran = topoq("simulate", "--trace", copy, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)["summary"]
    teams = {team["team"]: team for team in summary["teams"]}
    assert set(teams) == {f"vc-{row[4]}" for row in data_rows(PHILLY)}
    assert all(team["guarantee_gpus"] == 0 for team in teams.values())
    assert sum(team["completed"] for team in teams.values()) == len(data_rows(PHILLY))
    assert "guaranteed nothing" in ran.stderr
    table = topoq("simulate", "--trace", ITP, "--trace-format", "itp", "--limit", "10")
    assert table.returncode == 0, table.stderr
    assert "itp" in table.stdout and "Scenario itp-sample.csv" in table.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "give a scenario file or --trace FILE"),
        (("--limit", "3"), "go with --trace"),
        (("--trace", "no-such-file.csv"), "no file no-such-file.csv"),
        (("--trace", str(PHILLY), "--trace-format", "itp"), "not itp's"),
        (("--trace", str(PHILLY), "--limit", "0"), "--limit"),
    ],
)
def test_simulate_s_usage_errors_are_one_line(args: tuple[str, ...], says: str) -> None:
    ran = topoq("simulate", *args)
    assert ran.returncode == 2, ran.stdout
    assert says in ran.stderr and "Traceback" not in ran.stderr


def test_the_derived_cluster_holds_the_largest_job(tmp_path: Path) -> None:
    big = tmp_path / "itp.csv"
    big.write_text("job_id,submission_time,duration,num_gpu\na,0,600,200\nb,10,600,1\n")
    trace = read_trace(big)
    assert derived_nodes(trace) >= math.ceil(200 / GPUS_PER_NODE)
    result = Simulation(trace_scenario(trace)).run()
    assert sum(team.completed for team in result.summary.teams) == 2


def test_a_long_run_tells_its_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "PROGRESS_EVERY_CYCLES", 10)
    told: list[tuple[float, int]] = []
    result = Simulation(trace_scenario(read_trace(ITP))).run(lambda s, c: told.append((s, c)))
    assert len(told) >= result.cycles // 10 - 1 and told  # every 10 cycles
    assert told == sorted(told) and all(cycles <= result.cycles for _, cycles in told)
    assert told[-1][0] <= result.end_s
