"""Real GPU-cluster traces as simulator input (docs/simulate.md, "Traces"): Microsoft Philly
2017 (as the Sia artifact publishes it) and Microsoft ITP 2021 (ElasticFlow's raw traces), read
into one shape, ``Trace``: jobs with an arrival time, a duration and a GPU count, the teams
the trace names and the guarantees it implies. ``trace_scenario`` turns a trace into a
scenario for ``topoq simulate``: a cluster and policy derived from the trace unless given, and
each job a gang of whole nodes plus a remainder.

The assumptions, each documented in docs/simulate.md:

- Philly's ``timestamp`` is the arrival time, read as UTC; the trace starts at its earliest
  row. Its ``cluster`` column (a virtual cluster, VC) is the team, named ``vc-<hash>``. Its
  VC sizes (``philly_vc_nodes.csv`` beside the trace, when there) are the teams'
  guarantees in 8-GPU nodes; a VC without a size is guaranteed nothing and borrows. The
  derived cluster has as many 8-GPU nodes as the sizes add up to (at least the largest job).
- ITP has no teams: its jobs are one team's, ``itp``, guaranteed the whole cluster; its
  cluster size is not published, so the derived cluster is sized to the trace's mean GPU
  demand (GPU-seconds over the span between the first arrival and the last end), rounded up
  to whole 16-node blocks, and never smaller than the largest job.
- A job of ``g`` GPUs on nodes of ``n`` is ``g // n`` pods of ``n`` GPUs (``workers``) and,
  when ``g % n`` is not 0, one pod of the rest (``rest``): a gang, admitted whole.
- Each job's communication share (the fraction of an iteration spent in exposed
  communication at its tightest placement, for the cost model): 0 on one node, 0.1 up to 64
  GPUs, 0.2 above.

Rows that cannot be read are refused with the file, the line and what is wrong.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO

from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.policy import POLICY_API_VERSION, POLICY_KIND, policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobSpec
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import PodSetSpec, WorkloadSpec
from topoq.sim.events import ScenarioEvent
from topoq.sim.network import default_communication_share
from topoq.sim.scenario import Scenario
from topoq.sim.submission import Submit

GPUS_PER_NODE = 8
"""The derived cluster's nodes (p5.48xlarge) and the node size gangs are cut into."""
INSTANCE_TYPE = "p5.48xlarge"
BLOCK_NODES = 16
SPINE_BLOCKS = 8
"""The derived cluster's shape: spines of 8 blocks of 16 nodes (fewer when it is smaller)."""
PHILLY_VC_SIZES = "philly_vc_nodes.csv"
ITP_TEAM = "itp"
MAX_TRACE_JOBS = 1_000_000


class TraceFormat(StrEnum):
    PHILLY = "philly"
    """``timestamp,duration,num_gpus,gpu_time,cluster`` (the Sia artifact's Philly file)."""
    ITP = "itp"
    """``job_id,submission_time,duration,num_gpu`` (ElasticFlow's raw ITP traces)."""
    SYNTHETIC = "synthetic"
    """Drawn by ``topoq.sim.synthetic`` (no file)."""


_HEADERS = {
    TraceFormat.PHILLY: ("timestamp", "duration", "num_gpus", "gpu_time", "cluster"),
    TraceFormat.ITP: ("job_id", "submission_time", "duration", "num_gpu"),
}


@dataclass(frozen=True)
class TraceJob:
    id: str
    team: str
    arrival_s: float
    """Seconds after the trace's first arrival."""
    duration_s: float
    gpus: int
    line: int
    """Where it is in the file (1: the header)."""

    @property
    def communication_share(self) -> float:
        """The fraction of an iteration spent communicating at its tightest placement."""
        return default_communication_share(self.gpus, GPUS_PER_NODE)


@dataclass(frozen=True)
class Trace:
    source: str
    format: TraceFormat
    jobs: tuple[TraceJob, ...]
    """By arrival, then file order."""
    guarantees: Mapping[str, int] = field(default_factory=dict)
    """Each team's guarantee in nodes, as the trace gives it (a team it names without one: 0)."""
    notes: tuple[str, ...] = ()
    """What reading it assumed or left out, for the user."""

    @property
    def teams(self) -> list[str]:
        return sorted({job.team for job in self.jobs} | set(self.guarantees))


def detect_format(path: Path) -> TraceFormat:
    """The format whose header the file starts with."""
    header = tuple(next(_rows(path), ("",)))
    for known, columns in _HEADERS.items():
        if header == columns:
            return known
    formats = "; ".join(f"{name.value}: {','.join(cols)}" for name, cols in _HEADERS.items())
    raise InvalidInputError(
        f"the header {','.join(header)!r} is not one of a trace format topoq reads",
        where=f"{path}:1",
        hint=f"give --trace-format, or a file with one of these headers: {formats}",
    )


def read_trace(
    path: Path, trace_format: TraceFormat | None = None, *, limit: int | None = None
) -> Trace:
    """The trace in ``path`` (gzipped or not), its format detected from its header unless
    given; ``limit``: only the first so many jobs by arrival."""
    if not path.is_file():
        raise InvalidInputError(f"no file {path}", hint="give the path of a trace file")
    chosen = trace_format or detect_format(path)
    header = tuple(next(_rows(path), ()))
    if header != _HEADERS[chosen]:
        raise InvalidInputError(
            f"the header {','.join(header)!r} is not {chosen.value}'s",
            where=f"{path}:1",
            hint=f"a {chosen.value} trace starts with {','.join(_HEADERS[chosen])}",
        )
    if chosen is TraceFormat.SYNTHETIC:
        raise InvalidInputError(
            "a synthetic trace is drawn, not read", hint="give --trace-format philly or itp"
        )
    reader = _read_philly if chosen is TraceFormat.PHILLY else _read_itp
    trace = reader(path)
    jobs = sorted(trace.jobs, key=lambda job: (job.arrival_s, job.line))
    if not jobs:
        raise InvalidInputError(
            "the trace has no job", where=str(path), hint="give a trace with rows"
        )
    if limit is not None:
        jobs = jobs[:limit]
    start = jobs[0].arrival_s
    shifted = tuple(
        TraceJob(job.id, job.team, job.arrival_s - start, job.duration_s, job.gpus, job.line)
        for job in jobs
    )
    return Trace(trace.source, chosen, shifted, trace.guarantees, trace.notes)


def _rows(path: Path) -> Iterator[list[str]]:
    """The file's CSV rows (gunzipped when it ends in ``.gz``)."""
    try:
        with _opened(path) as text:
            yield from csv.reader(text)
    except (UnicodeDecodeError, csv.Error, EOFError, OSError) as error:
        raise InvalidInputError(
            f"the file cannot be read as CSV text: {error}",
            where=str(path),
            hint="give a CSV trace, plain or gzipped (.gz)",
        ) from None


def _opened(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _cells(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, str, list[str]]]:
    """Each row after the header, its cells stripped, with where it is (``file:line``);
    blank lines skipped, a row of another width refused, and a file of more than
    ``MAX_TRACE_JOBS`` rows refused as soon as the next row is read (not after reading it
    all)."""
    rows = 0
    for line, row in enumerate(_rows(path), start=1):
        if line > 1 and any(cell.strip() for cell in row):
            rows += 1
            if rows > MAX_TRACE_JOBS:
                raise InvalidInputError(
                    f"the file has more than {MAX_TRACE_JOBS:,} rows",
                    where=f"{path}:{line}",
                    hint=f"topoq reads at most {MAX_TRACE_JOBS:,} jobs of a trace; cut it",
                )
            where = f"{path}:{line}"
            _cell_count(row, columns, where)
            yield line, where, [cell.strip() for cell in row]


def _cell_count(row: Sequence[str], columns: Sequence[str], where: str) -> None:
    if len(row) != len(columns):
        raise InvalidInputError(
            f"{len(row)} fields where {len(columns)} were expected",
            where=where,
            hint=f"each row has {','.join(columns)}",
        )


def _number(
    text: str, column: str, where: str, *, least: float = 0.0, whole: bool = False
) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < least or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise InvalidInputError(
            f"{column} is {text!r}",
            where=where,
            hint=f"{column} must be {kind} of at least {least:g}",
        )
    return value


def _read_philly(path: Path) -> Trace:
    jobs = []
    for line, where, cells in _cells(path, _HEADERS[TraceFormat.PHILLY]):
        stamp, duration, gpus, _, cluster = cells
        try:
            arrival = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        except ValueError:
            raise InvalidInputError(
                f"timestamp is {stamp!r}", where=where, hint="timestamp is YYYY-MM-DD HH:MM:SS"
            ) from None
        if not cluster.isalnum():
            raise InvalidInputError(
                f"cluster is {cluster!r}",
                where=where,
                hint="cluster is the VC's hash (letters and digits)",
            )
        jobs.append(
            TraceJob(
                f"philly-{line}",
                f"vc-{cluster.lower()}",
                arrival.timestamp(),
                _number(duration, "duration", where, least=1),
                int(_number(gpus, "num_gpus", where, least=1, whole=True)),
                line,
            )
        )
    guarantees, notes = _philly_vc_sizes(path.with_name(PHILLY_VC_SIZES))
    return Trace(str(path), TraceFormat.PHILLY, tuple(jobs), guarantees, notes)


def _philly_vc_sizes(path: Path) -> tuple[dict[str, int], tuple[str, ...]]:
    if not path.is_file():
        return {}, (f"no {PHILLY_VC_SIZES} beside the trace: every VC is guaranteed nothing",)
    sizes = {}
    for _, where, (vc, nodes) in _cells(path, ("vc", "node num")):
        sizes[f"vc-{vc.lower()}"] = int(_number(nodes, "node num", where, whole=True))
    return sizes, (f"VC sizes from {path.name}: each VC's nodes are its guarantee",)


def _read_itp(path: Path) -> Trace:
    jobs = []
    for line, where, cells in _cells(path, _HEADERS[TraceFormat.ITP]):
        _, arrival, duration, gpus = cells
        jobs.append(
            TraceJob(
                f"itp-{line}",
                ITP_TEAM,
                _number(arrival, "submission_time", where),
                _number(duration, "duration", where, least=1),
                int(_number(gpus, "num_gpu", where, least=1, whole=True)),
                line,
            )
        )
    note = "ITP names no teams: every job is team itp's, guaranteed the whole cluster"
    return Trace(str(path), TraceFormat.ITP, tuple(jobs), {}, (note,))


# --- the scenario ------------------------------------------------------------------------
def derived_nodes(trace: Trace) -> int:
    """The derived cluster's size in 8-GPU nodes (see the module's assumptions)."""
    largest = max(math.ceil(job.gpus / GPUS_PER_NODE) for job in trace.jobs)
    if trace.guarantees:
        return max(largest, sum(trace.guarantees.values()))
    end = max(job.arrival_s + job.duration_s for job in trace.jobs)
    demand = sum(job.gpus * job.duration_s for job in trace.jobs) / max(end, 1.0)
    blocks = math.ceil(demand / GPUS_PER_NODE / BLOCK_NODES)
    return max(largest, blocks * BLOCK_NODES)


def derived_cluster(trace: Trace) -> tuple[tuple[NodeSpec, ...], TopologySpec]:
    """``cluster_of`` as many nodes as ``derived_nodes``."""
    return cluster_of(derived_nodes(trace), f"{trace.format.value}-derived", trace.source)


def cluster_of(
    nodes: int, name: str = "trace", source: str = "a trace"
) -> tuple[tuple[NodeSpec, ...], TopologySpec]:
    """Spines of blocks of 8-GPU nodes, at least ``nodes`` of them (whole spines once there
    is more than one)."""
    blocks = math.ceil(nodes / BLOCK_NODES)
    spines = math.ceil(blocks / SPINE_BLOCKS)
    shape = f"{spines}x{min(blocks, SPINE_BLOCKS)}x{min(nodes, BLOCK_NODES)}"
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "generate": f"{shape} {INSTANCE_TYPE}",
    }
    cluster = cluster_from_document(document, source=f"{source} (derived cluster)")
    return tuple(cluster.nodes), cluster.topology


def derived_policy(trace: Trace, cluster_nodes: int) -> ClusterPolicy:
    """A team per team of the trace, guaranteed what the trace gives it (ITP's one team: the
    whole cluster; a team without a size: nothing), each lending what it leaves idle and
    borrowing up to the whole cluster, first come, first served."""
    guarantees = dict(trace.guarantees)
    if trace.format is TraceFormat.ITP:
        guarantees = {ITP_TEAM: cluster_nodes}
    whole = {INSTANCE_TYPE: {NVIDIA_GPU: cluster_nodes * GPUS_PER_NODE}}
    teams = [
        {
            "name": team,
            "sharing": "LendAndBorrow",
            "absoluteBorrowLimits": whole,
            "quotas": [{"flavor": INSTANCE_TYPE, "instances": guarantees.get(team, 0)}],
        }
        for team in trace.teams
    ]
    document = {
        "apiVersion": POLICY_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {"name": f"{trace.format.value}-derived"},
        "scheduling": {"idleResourceSharing": True},
        "teams": teams,
    }
    return policy_from_document(document, source=f"{trace.source} (derived policy)")


def gang_of(job: TraceJob, gpus_per_node: int = GPUS_PER_NODE) -> WorkloadSpec:
    """Whole nodes of ``gpus_per_node`` GPUs, plus one pod of the rest."""
    whole, rest = divmod(job.gpus, gpus_per_node)
    pod_sets = []
    if whole:
        pod_sets.append(PodSetSpec("workers", whole, Resources({NVIDIA_GPU: gpus_per_node})))
    if rest:
        pod_sets.append(PodSetSpec("rest", 1, Resources({NVIDIA_GPU: rest})))
    return WorkloadSpec(job.id, tuple(pod_sets))


def trace_scenario(
    trace: Trace,
    cluster: tuple[Sequence[NodeSpec], TopologySpec] | None = None,
    policy: ClusterPolicy | None = None,
) -> Scenario:
    """The trace as a scenario: each job submitted at its arrival to run for its duration."""
    nodes, topology = cluster if cluster is not None else derived_cluster(trace)
    rules = policy if policy is not None else derived_policy(trace, len(nodes))
    events = tuple(
        ScenarioEvent(
            job.arrival_s,
            Submit(
                JobSpec(
                    JobId(job.id),
                    TeamName(job.team),
                    gang_of(job),
                    job.arrival_s,
                    runtime_s=job.duration_s,
                ),
                communication_share=job.communication_share,
            ),
            f"{trace.source}:{job.line}",
        )
        for job in trace.jobs
    )
    return Scenario(
        name=Path(trace.source).name,
        source=trace.source,
        nodes=tuple(nodes),
        topology=topology,
        policy=rules,
        events=events,
        warnings=trace.notes,
    )
