"""Real traces as simulator input (``topoq.sim.traces``): Philly 2017, Microsoft ITP 2021 and
Alibaba openb 2023 samples (tests/sim/traces/README.md) read into arrivals, durations, GPU
counts and teams, turned into gangs of whole nodes on a cluster and policy derived from the
trace (openb: its node list, GPU models kept), replayed through the simulator with every
GPU-second accounted for; rows that cannot be read refused with the file, the line and what
is wrong; the full openb default pod list read once; and ``topoq simulate --trace`` as a user
runs it."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.cli.test_cli import topoq
from topoq.domain.decisions import PendingReason
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import flavor_of
from topoq.domain.gpu_share import GPU_SHARING_LABEL
from topoq.domain.node import HOSTNAME_LABEL
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.sim import controlled
from topoq.sim.engine import Simulation
from topoq.sim.log import Decision
from topoq.sim.traces import (
    BLOCK_NODES,
    GPU_MODEL_LABEL,
    GPUS_PER_NODE,
    INSTANCE_TYPE,
    OPENB_NODE_LIST,
    TraceFormat,
    TraceJob,
    cluster_of,
    derived_cluster,
    derived_nodes,
    derived_policy,
    detect_format,
    gang_of,
    gpus_by_flavor,
    read_openb_nodes,
    read_openb_requests,
    read_trace,
    trace_scenario,
)

SAMPLES = Path(__file__).parent / "traces"
PHILLY = SAMPLES / "philly-sample.csv"
ITP = SAMPLES / "itp-sample.csv"
OPENB = SAMPLES / "openb-sample.csv"
OPENB_NODES = SAMPLES / OPENB_NODE_LIST
OPENB_FULL = Path("/work/shared/traces/alibaba_openb_2023/csv")


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
        (("--trace", str(PHILLY), "--trace-format", "openb"), "not openb's"),
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
    monkeypatch.setattr(controlled, "PROGRESS_EVERY_CYCLES", 10)
    told: list[tuple[float, int]] = []
    result = Simulation(trace_scenario(read_trace(ITP))).run(lambda s, c: told.append((s, c)))
    assert len(told) >= result.cycles // 10 - 1 and told  # every 10 cycles
    assert told == sorted(told) and all(cycles <= result.cycles for _, cycles in told)
    assert told[-1][0] <= result.end_s


# --- Alibaba openb 2023 --------------------------------------------------------------------
def openb_copy(tmp_path: Path, edits: dict[int, str], *, with_nodes: bool = True) -> Path:
    """The openb sample in ``tmp_path`` with lines replaced (1: the header), and its node list
    beside it unless not ``with_nodes``."""
    lines = OPENB.read_text().splitlines()
    for line, text in edits.items():
        lines[line - 1] = text
    copy = tmp_path / "openb_pod_list_default.csv"
    copy.write_text("\n".join(lines) + "\n")
    if with_nodes:
        shutil.copy(OPENB_NODES, tmp_path / OPENB_NODE_LIST)
    return copy


def with_gpu_spec(line: int, gpu_spec: str) -> str:
    cells = OPENB.read_text().splitlines()[line - 1].split(",")
    cells[5] = gpu_spec
    return ",".join(cells)


def test_an_openb_pod_list_gives_each_gpu_pod_its_times_and_gpus() -> None:
    assert detect_format(OPENB) is TraceFormat.OPENB
    trace = read_trace(OPENB)
    jobs = {job.line: job for job in trace.jobs}
    assert len(jobs) == 40 and {job.team for job in trace.jobs} == {"openb"}
    # (arrival, duration, GPUs) worked out by hand from the rows' raw values
    assert (jobs[2].arrival_s, jobs[2].duration_s, jobs[2].gpus) == (0, 12537496 - 0, 1)
    # scheduled 7,338 s after its creation: it runs from then to its deletion
    assert (jobs[14].arrival_s, jobs[14].duration_s) == (6588193, 10959245 - 6595531)
    assert (jobs[19].arrival_s, jobs[19].duration_s, jobs[19].gpus) == (9437497, 1332357, 8)
    assert (jobs[42].duration_s, jobs[42].gpus) == (10800396 - 10793686, 4)
    assert jobs[43].duration_s == 10001403 - 10001278  # Pending: from its creation
    assert (jobs[3].gpus, jobs[3].gpu_milli, jobs[3].gpus_held) == (1, 460, 0.46)  # a share
    assert jobs[2].gpu_milli == 0  # gpu_milli 1000: a whole GPU
    assert 7 not in jobs and 18 not in jobs  # no GPU
    assert 44 not in jobs  # created and deleted at 12774042: 0 s
    notes = "\n".join(trace.notes)
    assert "14 pods asking for part of one GPU, each packed onto one GPU device" in notes
    assert "2 pods of no GPU, skipped" in notes and "1 pod of 0 s" in notes
    assert "1 pod never scheduled" in notes and "team openb's" in notes


def test_an_openb_cluster_is_its_node_list_each_gpu_model_a_flavor() -> None:
    trace = read_trace(OPENB)
    nodes, topology = derived_cluster(trace)
    rows = data_rows(OPENB_NODES)
    assert [node.name for node in nodes] == [row[0] for row in rows]
    assert [node.allocatable.amount(NVIDIA_GPU) for node in nodes] == [int(r[3]) for r in rows]
    assert [node.labels[GPU_MODEL_LABEL] for node in nodes] == [row[4] for row in rows]
    assert [flavor_of(node) for node in nodes] == [row[4] for row in rows]
    listed = Resources.parse({"cpu": "64000m", "memory": "262144Mi"})  # the first row's
    assert all(nodes[0].allocatable.amount(name) == listed.amount(name) for name in listed)
    assert gpus_by_flavor(nodes) == {"G2": 32, "G3": 8, "P100": 44, "V100M16": 4, "V100M32": 16}
    assert len(topology.levels) == 3 and topology.levels[-1] == HOSTNAME_LABEL
    blocks = [node.labels[topology.levels[1]] for node in nodes]
    assert set(blocks[:16]) == {"l2-01-01"} and set(blocks[16:]) == {"l2-01-02"}  # 16 a block
    policy = derived_policy(trace, len(nodes), flavor_gpus=gpus_by_flavor(nodes))
    (team,) = policy.teams
    assert team.name == "openb"
    guaranteed = {quota.flavor: quota.guarantee.amount(NVIDIA_GPU) for quota in team.quotas}
    assert guaranteed == gpus_by_flavor(nodes)
    result = Simulation(trace_scenario(trace)).run()
    (summary,) = result.summary.teams
    assert summary.completed == 40 and result.summary.capacity_gpus == 104
    held = sum(job.gpus_held * job.duration_s for job in trace.jobs) / 3600
    assert summary.gpu_hours_in_guarantee == pytest.approx(held, rel=1e-6)
    assert all(node.labels[GPU_SHARING_LABEL] == "true" for node in nodes)


def test_an_openb_pod_list_alone_runs_on_a_cluster_derived_as_for_itp(tmp_path: Path) -> None:
    trace = read_trace(openb_copy(tmp_path, {}, with_nodes=False))
    assert trace.nodes == () and "no openb_node_list_gpu_node.csv beside" in trace.notes[-1]
    nodes, _ = derived_cluster(trace)
    assert len(nodes) == derived_nodes(trace) and len(nodes) % BLOCK_NODES == 0
    assert {flavor_of(node) for node in nodes} == {INSTANCE_TYPE}
    result = Simulation(trace_scenario(trace)).run()
    assert sum(team.completed for team in result.summary.teams) == 40


def test_a_pod_s_gpu_models_keep_it_to_nodes_of_those_models(tmp_path: Path) -> None:
    edits = {2: with_gpu_spec(2, "T4"), 3: with_gpu_spec(3, "V100M16|V100M32")}
    trace = read_trace(openb_copy(tmp_path, edits))
    jobs = {job.line: job for job in trace.jobs}
    assert jobs[2].gpu_models == ("T4",) and jobs[3].gpu_models == ("V100M16", "V100M32")
    assert "2 pods with a gpu_spec" in "\n".join(trace.notes)
    scenario = trace_scenario(trace)
    assert "1 job only for GPU models no node has (T4): waiting" in scenario.warnings[-1]
    result = Simulation(scenario).run()
    (stranded,) = result.left_pending  # no node is a T4: it waits, saying why
    assert stranded.job == "openb-2" and stranded.reason == PendingReason.NEVER_FITS_CURRENT_POLICY
    assert "selector mismatch" in (stranded.message or "")
    admitted = [e for e in result.log if e.job == "openb-3" and e.decision is Decision.ADMIT]
    (host,) = admitted[0].placement[HOSTNAME_LABEL]
    by_name = {node.name: node for node in scenario.nodes}
    assert by_name[host].labels[GPU_MODEL_LABEL] in ("V100M16", "V100M32")
    on_own = trace_scenario(trace, cluster_of(2))  # not the node list: the models are moot
    assert "2 jobs with GPU models (gpu_spec): not applied" in on_own.warnings[-2]
    # nor open to shares: the 14 pods asking for part of a GPU wait, and the run says so
    assert "14 jobs asking for part of a GPU, and no node" in on_own.warnings[-1]
    waiting = Simulation(on_own).run().left_pending
    assert len(waiting) == 14
    assert all(
        "no node of the topology is open to GPU shares" in (w.message or "") for w in waiting
    )
    nodes, topology = cluster_of(2)
    opened = [replace(n, labels={**n.labels, GPU_SHARING_LABEL: "true"}) for n in nodes]
    shared = trace_scenario(trace, (opened, topology))
    assert not any("no node of the cluster is open" in w for w in shared.warnings)
    assert Simulation(shared).run().left_pending == ()
    assert gang_of(jobs[2]).pod_sets[0].affinity_terms == ()
    (term,) = gang_of(jobs[3], pin_models=True).pod_sets[0].affinity_terms
    assert term.matches({GPU_MODEL_LABEL: "V100M32"}) and not term.matches({GPU_MODEL_LABEL: "G2"})


POD = "openb-pod-0002,12000,24576,{gpus},{milli},{spec},LS,Running,{made},{gone},{ran}"


def pod_row(**changed: str) -> str:
    cells = {"gpus": "1", "milli": "1000", "spec": "", "made": "1558381", "gone": "12902960"}
    return POD.format(**(cells | {"ran": "1558381"} | changed))


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (pod_row().rsplit(",", 1)[0], "10 fields where 11 were expected"),
        (pod_row(gpus="one"), "num_gpu is 'one'"),
        (pod_row(gpus="-1"), "num_gpu is '-1'"),
        (pod_row(milli="1500"), "gpu_milli is '1500' with num_gpu 1"),
        (pod_row(gpus="2", milli="500"), "gpu_milli is '500' with num_gpu 2"),
        (pod_row(milli="0"), "gpu_milli is '0' with num_gpu 1"),
        (pod_row(made="soon"), "creation_time is 'soon'"),
        (pod_row(gone=""), "deletion_time is ''"),
        (pod_row(gone="1558000"), "deletion_time 1558000 is before scheduled_time 1558381"),
        (pod_row(ran="", gone="1558000"), "deletion_time 1558000 is before creation_time"),
        (pod_row(spec="T4|"), "'' is not a valid GPU model in gpu_spec"),
    ],
)
def test_an_openb_row_that_cannot_be_read_is_refused_with_its_line(
    tmp_path: Path, row: str, says: str
) -> None:
    bad = openb_copy(tmp_path, {4: row})
    with pytest.raises(InvalidInputError) as raised:
        read_trace(bad)
    assert raised.value.where == f"{bad}:4" and says in raised.value.message
    assert raised.value.hint


def test_a_node_list_row_that_cannot_be_read_is_refused_with_its_line(tmp_path: Path) -> None:
    pods = openb_copy(tmp_path, {})
    node_list = tmp_path / OPENB_NODE_LIST
    lines = node_list.read_text().splitlines()
    lines[5] = "openb-node-0004,64000,262144,two,P100"
    node_list.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInputError, match="gpu is 'two'") as raised:
        read_trace(pods)
    assert raised.value.where == f"{node_list}:6"
    node_list.write_text("name,gpus\n")
    with pytest.raises(InvalidInputError, match="is not 'sn,cpu_milli"):
        read_trace(pods)


def test_topoq_simulate_replays_an_openb_pod_list_on_its_node_list() -> None:
    ran = topoq("simulate", "--trace", OPENB, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    (team,) = json.loads(ran.stdout)["summary"]["teams"]
    assert team["team"] == "openb" and team["completed"] == 40
    assert team["guarantee_gpus"] == 104  # the 30 listed nodes' GPUs
    assert "14 pods asking for part of one GPU" in ran.stderr


@pytest.mark.skipif(not OPENB_FULL.is_dir(), reason="the shared openb trace is not here")
def test_the_whole_openb_default_pod_list_is_read_as_its_readme_counts_it() -> None:
    began = time.monotonic()
    trace = read_trace(OPENB_FULL / "openb_pod_list_default.csv")
    nodes, _ = derived_cluster(trace)
    assert time.monotonic() - began < 5
    # 8,152 pods: 1,088 of no GPU, one of 0 s (lines counted by awk over the raw file)
    assert len(trace.jobs) == 8152 - 1088 - 1 == 7063
    notes = "\n".join(trace.notes)
    assert "1,088 pods of no GPU" in notes and "1 pod of 0 s" in notes
    # the README's 3,078 fractional pods less the 0-s one (gpu_milli 230), skipped
    assert "3,077 pods asking for part of one GPU" in notes
    assert "860 pods never scheduled" in notes and "gpu_spec" not in notes
    assert sum(job.gpus for job in trace.jobs) == 7432  # fractions as whole GPUs
    assert len(nodes) == 1213 and gpus_by_flavor(nodes) == {
        "A10": 2,
        "G2": 4392,
        "G3": 312,
        "P100": 265,
        "T4": 842,
        "V100M16": 195,
        "V100M32": 204,
    }  # the README's table: 6,212 GPUs
    with pytest.raises(InvalidInputError, match="not one of a trace format"):
        read_trace(OPENB_FULL / "openb_pod_list_multigpu20.csv")  # no times


def test_an_openb_pod_list_gives_every_pod_s_ask_for_the_fragmentation_protocol(
    tmp_path: Path,
) -> None:
    requests = read_openb_requests(OPENB)
    assert len(requests) == len(data_rows(OPENB))  # CPU-only pods too, in file order
    first = requests[1]
    assert (first.name, first.cpu_milli, first.memory_mib, first.gpus, first.gpu_milli) == (
        "openb-pod-0001",
        6000,
        12288,
        1,
        460,
    )
    assert len(read_openb_nodes(OPENB_NODES)) == len(data_rows(OPENB_NODES))
    # a multigpu list has the first five columns only
    short = tmp_path / "openb_pod_list_multigpu50.csv"
    short.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,4000,100,8,1000\np-1,2000,50,0,0\n"
    )
    eight, cpu_only = read_openb_requests(short)
    assert (eight.gpus, eight.gpu_milli, eight.gpu_models) == (8, 1000, ())
    assert (cpu_only.gpus, cpu_only.gpu_milli) == (0, 0)


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (pod_row(gpus="2", milli="500"), "gpu_milli is '500' with num_gpu 2"),
        (pod_row(gpus="1.5"), "num_gpu is '1.5'"),
        (pod_row().rsplit(",", 1)[0], "10 fields where 11 were expected"),
    ],
)
def test_a_pod_ask_that_cannot_be_read_is_refused_with_its_line(
    tmp_path: Path, row: str, says: str
) -> None:
    bad = openb_copy(tmp_path, {4: row})
    with pytest.raises(InvalidInputError) as raised:
        read_openb_requests(bad)
    assert raised.value.where == f"{bad}:4" and says in raised.value.message
    with pytest.raises(InvalidInputError, match="not an openb pod list"):
        read_openb_requests(OPENB_NODES)
