"""Real GPU-cluster traces as simulator input (docs/simulate.md, "Traces"): Microsoft Philly
2017 (as the Sia artifact publishes it), Microsoft ITP 2021 (ElasticFlow's raw traces) and
Alibaba's openb 2023 pod lists (the FGD artifact), read into one shape, ``Trace``: jobs with an
arrival time, a duration and a GPU count, the teams the trace names, the guarantees it implies
and, for openb, the nodes it ran on. ``trace_scenario`` turns a trace into a scenario for
``topoq simulate``: a cluster and policy derived from the trace unless given, and each job a
gang of whole nodes plus a remainder.

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
- openb has no teams either: its pods are team ``openb``'s, guaranteed the whole cluster. A
  pod arrives at its ``creation_time`` and runs from its ``scheduled_time`` (or, never
  scheduled, its creation) to its ``deletion_time``; a pod of no GPU, or of 0 s, is skipped;
  a pod asking for part of one GPU asks for that share (``topoq.io/gpu-milli``) and every
  node of the cluster is open to shares (docs/gpu-sharing.md), so that it is packed onto one
  GPU device beside others. With ``openb_node_list_gpu_node.csv`` beside it, the cluster is
  that list's nodes, each GPU model a flavor, in blocks of 16 in file order (the list has no
  topology), and a pod's ``gpu_spec`` keeps it on nodes of those models; without it, the
  cluster is derived as for ITP and ``gpu_spec`` is not applied.
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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO

from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.policy import POLICY_API_VERSION, POLICY_KIND, policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import flavor_of
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.gpu_share import (
    GPU_MILLI_PER_GPU,
    GPU_MODEL_LABEL,
    GPU_SHARE,
    GPU_SHARING_LABEL,
    MAX_GPUS_ASKED,
    bounded_gpu_ask,
    gpus_text,
    opens_gpus_to_shares,
)
from topoq.domain.job import JobId, JobSpec
from topoq.domain.names import check_job_id, check_label_name, check_label_value
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, TopologySpec
from topoq.domain.workload import (
    NodeSelectorTerm,
    PodSetSpec,
    SelectorOperator,
    SelectorRequirement,
    WorkloadSpec,
)
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
OPENB_TEAM = "openb"
OPENB_NODE_LIST = "openb_node_list_gpu_node.csv"
"""openb's GPU nodes, looked for beside a pod list: the cluster the pods ran on."""
WHOLE_GPU_MILLI = 1000
"""openb's ``gpu_milli`` of a whole GPU."""
MAX_TRACE_JOBS = 1_000_000


class TraceFormat(StrEnum):
    PHILLY = "philly"
    """``timestamp,duration,num_gpus,gpu_time,cluster`` (the Sia artifact's Philly file)."""
    ITP = "itp"
    """``job_id,submission_time,duration,num_gpu`` (ElasticFlow's raw ITP traces)."""
    OPENB = "openb"
    """``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`` (Alibaba's openb pod
    lists, ``openb_pod_list_*.csv``, all but the ``multigpu`` ones, which have no times)."""
    TOPOQ = "topoq"
    """``job_id,team,submitted_s,duration_s,gpus``: topoq's own, for a trace of one's own
    cluster (``write_trace`` writes it; docs/simulate.md)."""
    SYNTHETIC = "synthetic"
    """Drawn by ``topoq.sim.synthetic`` (no file)."""


_HEADERS = {
    TraceFormat.PHILLY: ("timestamp", "duration", "num_gpus", "gpu_time", "cluster"),
    TraceFormat.ITP: ("job_id", "submission_time", "duration", "num_gpu"),
    TraceFormat.TOPOQ: ("job_id", "team", "submitted_s", "duration_s", "gpus"),
    TraceFormat.OPENB: (
        "name",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        "qos",
        "pod_phase",
        "creation_time",
        "deletion_time",
        "scheduled_time",
    ),
}
_OPENB_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_ONE_TEAM = {TraceFormat.ITP: ITP_TEAM, TraceFormat.OPENB: OPENB_TEAM}
"""The formats that name no teams, and the one team their jobs are, guaranteed everything."""


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
    gpu_models: tuple[str, ...] = ()
    """The GPU models it may run on (openb's ``gpu_spec``); empty: any."""
    gpu_milli: int = 0
    """Its share of its one GPU in thousandths (openb's ``gpu_milli`` below 1000); 0: it
    asks for ``gpus`` whole GPUs."""

    @property
    def gpus_held(self) -> float:
        """The GPUs it holds while it runs: its share of one, or its whole GPUs."""
        return self.gpu_milli / GPU_MILLI_PER_GPU if self.gpu_milli else self.gpus

    @property
    def communication_share(self) -> float:
        """The fraction of an iteration spent communicating at its tightest placement."""
        return default_communication_share(self.gpus, GPUS_PER_NODE)


@dataclass(frozen=True)
class TraceNode:
    """A node of a trace's published cluster (a row of openb's node list)."""

    name: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    model: str
    """Its GPU model (openb's G1-G3 are Alibaba's undisclosed ones)."""


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
    nodes: tuple[TraceNode, ...] = ()
    """The nodes the trace ran on, when it publishes them (openb's node list beside it)."""

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
            "a synthetic trace is drawn, not read",
            hint="give --trace-format philly, itp or openb",
        )
    trace = _READERS[chosen](path)
    jobs = sorted(trace.jobs, key=lambda job: (job.arrival_s, job.line))
    if not jobs:
        raise InvalidInputError(
            "the trace has no job", where=str(path), hint="give a trace with rows"
        )
    if limit is not None:
        jobs = jobs[:limit]
    start = jobs[0].arrival_s
    shifted = tuple(replace(job, arrival_s=job.arrival_s - start) for job in jobs)
    return replace(trace, jobs=shifted)


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


def _read_topoq(path: Path) -> Trace:
    """Each row a job of its own id and team, arriving at ``submitted_s`` (any origin:
    arrivals are counted from the first) to run ``duration_s``, asking for ``gpus`` whole
    GPUs or a share of one (``0.5``)."""
    jobs = []
    first_line: dict[str, int] = {}
    for line, where, cells in _cells(path, _HEADERS[TraceFormat.TOPOQ]):
        job_id, team, submitted, duration, gpus = cells
        check_job_id(job_id, where=f"{where}, job_id")
        if job_id in first_line:
            raise InvalidInputError(
                f"job_id {job_id!r} is given twice (first on line {first_line[job_id]})",
                where=where,
                hint="give every job of the trace an id of its own",
            )
        first_line[job_id] = line
        check_label_name(team, what="team name", where=f"{where}, team")
        whole, milli = _trace_gpus(gpus, where)
        jobs.append(
            TraceJob(
                job_id,
                team,
                _number(submitted, "submitted_s", where),
                _number(duration, "duration_s", where, least=1),
                whole,
                line,
                gpu_milli=milli,
            )
        )
    note = "a topoq trace names no guarantees: each team is guaranteed nothing (give --policy)"
    return Trace(str(path), TraceFormat.TOPOQ, tuple(jobs), {}, (note,))


def _trace_gpus(text: str, where: str) -> tuple[int, int]:
    """A topoq trace's ``gpus``: whole GPUs (1 to ``MAX_GPUS_ASKED``), or a share of one
    (``0.5``: 1 GPU at 500 thousandths)."""
    try:
        asked = bounded_gpu_ask(text, f"{where}, gpus")
    except InvalidInputError:
        asked = None
    if asked is None:
        hint = (
            f"gpus is a whole number of GPUs from 1 to {MAX_GPUS_ASKED:,}, "
            "or a share of one GPU (0.5)"
        )
        raise InvalidInputError(f"gpus is {text!r}", where=where, hint=hint)
    resource, amount = asked
    return (1, amount) if resource == GPU_SHARE else (amount, 0)


def write_trace(trace: Trace, path: Path) -> None:
    """``trace`` as a topoq trace at ``path`` (gzipped when it ends in ``.gz``): what
    ``read_trace`` reads back as the same jobs, teams, arrivals, durations and GPUs."""
    with (
        gzip.open(path, "wt", encoding="utf-8", newline="")
        if path.suffix == ".gz"
        else open(path, "w", encoding="utf-8", newline="")
    ) as text:
        out = csv.writer(text)
        out.writerow(_HEADERS[TraceFormat.TOPOQ])
        for job in trace.jobs:
            gpus = gpus_text(0, job.gpu_milli) if job.gpu_milli else str(job.gpus)
            out.writerow([job.id, job.team, repr(job.arrival_s), repr(job.duration_s), gpus])


@dataclass(frozen=True)
class _OpenbPod:
    """A row of an openb pod list, checked: what a replay needs of it."""

    created_s: float
    duration_s: float
    gpus: int
    gpu_milli: int
    """Its share of its one GPU (``gpu_milli`` below 1000); 0: whole GPUs."""
    scheduled: bool
    gpu_models: tuple[str, ...]


def _read_openb(path: Path) -> Trace:
    """Each pod of a GPU and more than 0 s is a job; what was skipped or bent is counted in
    the notes."""
    jobs = []
    counts: Counter[str] = Counter()
    for line, where, cells in _cells(path, _HEADERS[TraceFormat.OPENB]):
        pod = _openb_pod(cells, where)
        if not pod.gpus or not pod.duration_s:
            counts["no GPU" if not pod.gpus else "0 s"] += 1
            continue
        counts["fractional"] += bool(pod.gpu_milli)
        counts["never scheduled"] += not pod.scheduled
        counts["models"] += bool(pod.gpu_models)
        jobs.append(
            TraceJob(
                f"openb-{line}",
                OPENB_TEAM,
                pod.created_s,
                pod.duration_s,
                pod.gpus,
                line,
                pod.gpu_models,
                pod.gpu_milli,
            )
        )
    nodes, cluster_note = _openb_nodes(path.with_name(OPENB_NODE_LIST))
    notes = (*_openb_notes(counts), cluster_note)
    return Trace(str(path), TraceFormat.OPENB, tuple(jobs), {}, notes, nodes)


@dataclass(frozen=True)
class OpenbRequest:
    """What one pod of an openb pod list asks of the node it runs on, times left out: the
    input of FGD's fragmentation protocol (``benchmarks/gpu_fragmentation.py``)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    """GPUs it asks for: 0 (CPU only), 1 (a whole one or a share of it) or more (whole)."""
    gpu_milli: int
    """Its share of each GPU in thousandths (1000: whole GPUs; below: part of its one GPU)."""
    gpu_models: tuple[str, ...] = ()
    """The GPU models it may run on (``gpu_spec``); empty: any."""


_OPENB_REQUEST_COLUMNS = _HEADERS[TraceFormat.OPENB][:5]
"""The columns every openb pod list starts with (the ``multigpu`` lists have only these)."""


def read_openb_requests(path: Path) -> tuple[OpenbRequest, ...]:
    """Every pod of an openb pod list (all 24 lists: the ``multigpu`` ones have no times and
    no ``gpu_spec``), CPU-only ones included, in file order; a row that cannot be read is
    refused with its line."""
    if not path.is_file():
        raise InvalidInputError(f"no file {path}", hint="give the path of an openb pod list")
    header = tuple(next(_rows(path), ()))
    if header not in (_HEADERS[TraceFormat.OPENB], _OPENB_REQUEST_COLUMNS):
        raise InvalidInputError(
            f"the header {','.join(header)!r} is not an openb pod list's",
            where=f"{path}:1",
            hint=f"an openb pod list starts with {','.join(_OPENB_REQUEST_COLUMNS)}",
        )
    requests = []
    for _, where, cells in _cells(path, header):
        name, cpu_milli, memory_mib, num_gpu, gpu_milli = cells[:5]
        gpus = int(_number(num_gpu, "num_gpu", where, whole=True))
        _asks_for_part_of_a_gpu(gpus, gpu_milli, where)  # a share the README rules out
        requests.append(
            OpenbRequest(
                name,
                int(_number(cpu_milli, "cpu_milli", where, whole=True)),
                int(_number(memory_mib, "memory_mib", where, whole=True)),
                gpus,
                int(_number(gpu_milli, "gpu_milli", where, whole=True)) if gpus else 0,
                _gpu_models(cells[5], where) if len(cells) > 5 else (),
            )
        )
    if not requests:
        raise InvalidInputError("the pod list has no pod", where=str(path), hint="give rows")
    return tuple(requests)


def read_openb_nodes(path: Path) -> tuple[TraceNode, ...]:
    """The nodes of an openb node list (``openb_node_list_gpu_node.csv``)."""
    if not path.is_file():
        raise InvalidInputError(f"no file {path}", hint="give the path of an openb node list")
    nodes, _ = _openb_nodes(path)
    return nodes


def _openb_pod(cells: Sequence[str], where: str) -> _OpenbPod:
    """The pod's times, as the openb README defines them (seconds from the trace's start;
    ``scheduled_time`` empty for a pod never scheduled), its GPUs and the models it may use."""
    _, _, _, num_gpu, gpu_milli, gpu_spec, _, _, created, deleted, scheduled = cells
    gpus = int(_number(num_gpu, "num_gpu", where, whole=True))
    fractional = _asks_for_part_of_a_gpu(gpus, gpu_milli, where)
    share = int(_number(gpu_milli, "gpu_milli", where, whole=True)) if fractional else 0
    created_s = _number(created, "creation_time", where)
    start_column, start = ("scheduled_time", scheduled) if scheduled else ("creation_time", created)
    start_s = _number(start, start_column, where)
    deleted_s = _number(deleted, "deletion_time", where)
    if deleted_s < start_s:
        raise InvalidInputError(
            f"deletion_time {deleted} is before {start_column} {start}",
            where=where,
            hint="a pod is deleted after it starts",
        )
    models = _gpu_models(gpu_spec, where)
    return _OpenbPod(created_s, deleted_s - start_s, gpus, share, bool(scheduled), models)


def _asks_for_part_of_a_gpu(gpus: int, gpu_milli: str, where: str) -> bool:
    """Whether the pod asks for part of its one GPU; a share the README rules out (above a
    whole GPU, none of a GPU asked for, part of each of several GPUs) is refused."""
    milli = _number(gpu_milli, "gpu_milli", where, whole=True)
    whole = milli == WHOLE_GPU_MILLI
    if milli > WHOLE_GPU_MILLI or (gpus and not milli) or (gpus > 1 and not whole):
        raise InvalidInputError(
            f"gpu_milli is {gpu_milli!r} with num_gpu {gpus}",
            where=where,
            hint="gpu_milli is each GPU's share in thousandths: 1 to 1000 for a pod of one "
            "GPU, 1000 for a pod of several",
        )
    return gpus == 1 and not whole


def _gpu_models(gpu_spec: str, where: str) -> tuple[str, ...]:
    """``gpu_spec``'s models (joined by ``|``), each a node label's value."""
    if not gpu_spec:
        return ()
    return tuple(
        check_label_value(model, what="GPU model in gpu_spec", where=where)
        for model in gpu_spec.split("|")
    )


def _openb_notes(counts: Mapping[str, int]) -> tuple[str, ...]:
    """What reading the pods skipped or bent, counted (over the whole file)."""
    said = {
        "no GPU": "of no GPU, skipped: topoq schedules GPU gangs",
        "0 s": "of 0 s (deleted when started), skipped",
        "fractional": "asking for part of one GPU, each packed onto one GPU device beside "
        "others (every node is open to shares)",
        "never scheduled": "never scheduled (no scheduled_time), each run from its creation "
        "to its deletion",
        "models": "with a gpu_spec, the GPU models they may run on",
    }
    counted = [
        f"{_counted(counts[kind], 'pod')} {text}" for kind, text in said.items() if counts[kind]
    ]
    one_team = "openb names no teams: every pod is team openb's, guaranteed the whole cluster"
    return (one_team, *counted)


def _counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _openb_nodes(path: Path) -> tuple[tuple[TraceNode, ...], str]:
    """The node list's nodes and a note on the cluster they make (none: no node list)."""
    if not path.is_file():
        return (), (
            f"no {OPENB_NODE_LIST} beside the trace: the cluster is derived as for ITP "
            "(8-GPU nodes sized to the demand) and gpu_spec is not applied"
        )
    _check_header(path, _OPENB_NODE_COLUMNS)
    nodes = tuple(
        _openb_node(cells, where) for _, where, cells in _cells(path, _OPENB_NODE_COLUMNS)
    )
    if not nodes:
        raise InvalidInputError(
            "the node list has no node", where=str(path), hint="give a node list with rows"
        )
    gpus: Counter[str] = Counter()
    for node in nodes:
        gpus[node.model] += node.gpus
    models = ", ".join(f"{model} {count:,}" for model, count in sorted(gpus.items()))
    return nodes, (
        f"the derived cluster is {path.name}'s {len(nodes):,} nodes ({models} GPUs), each GPU "
        f"model a flavor, in blocks of {BLOCK_NODES} in file order: the list has no topology"
    )


def _openb_node(cells: Sequence[str], where: str) -> TraceNode:
    name, cpu_milli, memory_mib, gpus, model = cells
    return TraceNode(
        check_label_value(name, what="node name (sn)", where=where),
        int(_number(gpus, "gpu", where, least=1, whole=True)),
        int(_number(cpu_milli, "cpu_milli", where, least=1, whole=True)),
        int(_number(memory_mib, "memory_mib", where, least=1, whole=True)),
        check_label_value(model, what="GPU model", where=where),
    )


def _check_header(path: Path, columns: Sequence[str]) -> None:
    header = tuple(next(_rows(path), ()))
    if header != tuple(columns):
        raise InvalidInputError(
            f"the header {','.join(header)!r} is not {','.join(columns)!r}",
            where=f"{path}:1",
            hint=f"{path.name} starts with {','.join(columns)}",
        )


_READERS = {
    TraceFormat.PHILLY: _read_philly,
    TraceFormat.ITP: _read_itp,
    TraceFormat.TOPOQ: _read_topoq,
    TraceFormat.OPENB: _read_openb,
}


# --- the scenario ------------------------------------------------------------------------
def derived_nodes(trace: Trace) -> int:
    """The derived cluster's size in 8-GPU nodes (see the module's assumptions)."""
    largest = max(math.ceil(job.gpus / GPUS_PER_NODE) for job in trace.jobs)
    if trace.guarantees:
        return max(largest, sum(trace.guarantees.values()))
    end = max(job.arrival_s + job.duration_s for job in trace.jobs)
    demand = sum(job.gpus_held * job.duration_s for job in trace.jobs) / max(end, 1.0)
    blocks = math.ceil(demand / GPUS_PER_NODE / BLOCK_NODES)
    return max(largest, blocks * BLOCK_NODES)


def derived_cluster(trace: Trace) -> tuple[tuple[NodeSpec, ...], TopologySpec]:
    """The trace's own nodes when it publishes them (``listed_cluster``), else ``cluster_of``
    as many nodes as ``derived_nodes``."""
    if trace.nodes:
        found = listed_cluster(trace.nodes, f"{trace.format.value}-nodes", trace.source)
    else:
        found = cluster_of(derived_nodes(trace), f"{trace.format.value}-derived", trace.source)
    if not any(job.gpu_milli for job in trace.jobs):
        return found
    nodes, topology = found
    opened = {GPU_SHARING_LABEL: "true"}
    return tuple(replace(node, labels={**node.labels, **opened}) for node in nodes), topology


def listed_cluster(
    nodes: Sequence[TraceNode], name: str = "trace", source: str = "a trace"
) -> tuple[tuple[NodeSpec, ...], TopologySpec]:
    """The nodes as listed, each labelled with its GPU model twice: ``GPU_MODEL_LABEL`` for
    pods' model constraints, and the instance type, so that each model is a flavor of its
    own (a quota of one model's GPUs is not met by another's). A node list says nothing of
    the network, so the nodes are laid out as ``cluster_of`` lays them: blocks of 16 in list
    order, under spines of 8 blocks."""
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "levels": [*AWS_NETWORK_LAYER_LABELS[:2], HOSTNAME_LABEL],
        "nodes": [_node_entry(index, node) for index, node in enumerate(nodes)],
    }
    cluster = cluster_from_document(document, source=f"{source} (derived cluster)")
    return tuple(cluster.nodes), cluster.topology


def _node_entry(index: int, node: TraceNode) -> dict[str, object]:
    spine, block = divmod(index // BLOCK_NODES, SPINE_BLOCKS)
    return {
        "name": node.name,
        "instance_type": node.model,
        "allocatable": {
            NVIDIA_GPU: node.gpus,
            "cpu": f"{node.cpu_milli}m",
            "memory": f"{node.memory_mib}Mi",
        },
        "labels": {
            AWS_NETWORK_LAYER_LABELS[0]: f"l1-{spine + 1:02d}",
            AWS_NETWORK_LAYER_LABELS[1]: f"l2-{spine + 1:02d}-{block + 1:02d}",
            GPU_MODEL_LABEL: node.model,
        },
    }


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


def derived_policy(
    trace: Trace, cluster_nodes: int, *, flavor_gpus: Mapping[str, int] | None = None
) -> ClusterPolicy:
    """A team per team of the trace, guaranteed what the trace gives it (ITP's and openb's
    one team: the whole cluster; a team without a size: nothing), each lending what it
    leaves idle and borrowing up to the whole cluster, first come, first served.

    The cluster is ``cluster_nodes`` p5.48xlarge nodes, or, given ``flavor_gpus`` (a listed
    cluster's GPUs per flavor, ``gpus_by_flavor``), those flavors: a team guaranteed ``n`` of
    the ``cluster_nodes`` nodes is guaranteed that share of each flavor's GPUs."""
    guarantees = dict(trace.guarantees)
    if trace.format in _ONE_TEAM:
        guarantees = {_ONE_TEAM[trace.format]: cluster_nodes}
    teams = [
        {"name": team, "sharing": "LendAndBorrow"}
        | _team_quotas(guarantees.get(team, 0), cluster_nodes, flavor_gpus)
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


def _team_quotas(
    nodes: int, cluster_nodes: int, flavor_gpus: Mapping[str, int] | None
) -> dict[str, object]:
    """A team's quotas and borrow limits (the whole cluster) in a policy document."""
    if flavor_gpus is None:
        return {
            "absoluteBorrowLimits": {INSTANCE_TYPE: {NVIDIA_GPU: cluster_nodes * GPUS_PER_NODE}},
            "quotas": [{"flavor": INSTANCE_TYPE, "instances": nodes}],
        }
    return {
        "absoluteBorrowLimits": {
            flavor: {NVIDIA_GPU: gpus} for flavor, gpus in flavor_gpus.items()
        },
        "quotas": [
            {"flavor": flavor, "resources": {NVIDIA_GPU: gpus * nodes // cluster_nodes}}
            for flavor, gpus in flavor_gpus.items()
        ],
    }


def gpus_by_flavor(nodes: Sequence[NodeSpec]) -> dict[str, int]:
    """The nodes' GPUs per flavor (instance type), by flavor name."""
    gpus: Counter[str] = Counter()
    for node in nodes:
        gpus[flavor_of(node)] += node.allocatable.amount(NVIDIA_GPU)
    return dict(sorted(gpus.items()))


def gang_of(
    job: TraceJob, gpus_per_node: int = GPUS_PER_NODE, *, pin_models: bool = False
) -> WorkloadSpec:
    """Whole nodes of ``gpus_per_node`` GPUs, plus one pod of the rest; with ``pin_models``
    (a cluster whose nodes carry ``GPU_MODEL_LABEL``), on nodes of the job's GPU models only,
    when it names any."""
    models = _on_models(job.gpu_models) if pin_models and job.gpu_models else ()
    if job.gpu_milli:
        share = Resources({GPU_SHARE: job.gpu_milli})
        return WorkloadSpec(job.id, (PodSetSpec("share", 1, share, affinity_terms=models),))
    whole, rest = divmod(job.gpus, gpus_per_node)
    pod_sets = []
    if whole:
        gpus = Resources({NVIDIA_GPU: gpus_per_node})
        pod_sets.append(PodSetSpec("workers", whole, gpus, affinity_terms=models))
    if rest:
        pod_sets.append(PodSetSpec("rest", 1, Resources({NVIDIA_GPU: rest}), affinity_terms=models))
    return WorkloadSpec(job.id, tuple(pod_sets))


def _on_models(models: tuple[str, ...]) -> tuple[NodeSelectorTerm, ...]:
    """A required node affinity: a node whose GPU model is one of ``models``."""
    model = SelectorRequirement(GPU_MODEL_LABEL, SelectorOperator.IN, models)
    return (NodeSelectorTerm((model,)),)


def trace_scenario(
    trace: Trace,
    cluster: tuple[Sequence[NodeSpec], TopologySpec] | None = None,
    policy: ClusterPolicy | None = None,
    time_limit_factor: float | None = None,
) -> Scenario:
    """The trace as a scenario: each job submitted at its arrival to run for its duration.
    On the trace's own nodes (none given, ``trace.nodes`` known), each GPU model is a flavor
    and each job is kept to the GPU models it names. ``time_limit_factor``: each job is given
    a time limit of its duration times it, rounded up to a second (what its user would have
    asked; the traces record none), so that expected starts and backfill can be worked out."""
    on_own_nodes = cluster is None and bool(trace.nodes)
    nodes, topology = cluster if cluster is not None else derived_cluster(trace)
    flavors = gpus_by_flavor(nodes) if on_own_nodes else None
    rules = policy if policy is not None else derived_policy(trace, len(nodes), flavor_gpus=flavors)
    events = tuple(
        ScenarioEvent(
            job.arrival_s,
            Submit(
                JobSpec(
                    JobId(job.id),
                    TeamName(job.team),
                    gang_of(job, pin_models=on_own_nodes),
                    job.arrival_s,
                    runtime_s=job.duration_s,
                    time_limit_s=(
                        None
                        if time_limit_factor is None
                        else float(math.ceil(job.duration_s * time_limit_factor))
                    ),
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
        warnings=(
            *trace.notes,
            *_model_warnings(trace.jobs, nodes, pinned=on_own_nodes),
            *_share_warnings(trace.jobs, nodes),
        ),
    )


def _share_warnings(jobs: Sequence[TraceJob], nodes: Sequence[NodeSpec]) -> tuple[str, ...]:
    """Jobs asking for part of a GPU on a cluster none of whose nodes is open to shares (a
    cluster given, not derived from the trace) wait to the end: say so."""
    sharing = sum(1 for job in jobs if job.gpu_milli)
    if not sharing or any(opens_gpus_to_shares(node.labels) for node in nodes):
        return ()
    return (
        f"{_counted(sharing, 'job')} asking for part of a GPU, and no node of the cluster is "
        f'open to shares (label nodes {GPU_SHARING_LABEL}: "true"): waiting to the end',
    )


def _model_warnings(
    jobs: Sequence[TraceJob], nodes: Sequence[NodeSpec], *, pinned: bool
) -> tuple[str, ...]:
    """What becomes of the jobs' GPU models: not applied (the cluster does not say its
    nodes' models), or, applied, which jobs no node's model suits (they wait to the end)."""
    constrained = [job for job in jobs if job.gpu_models]
    if not constrained:
        return ()
    if not pinned:
        return (
            f"{_counted(len(constrained), 'job')} with GPU models (gpu_spec): not applied, "
            "the cluster is not the trace's own nodes",
        )
    present = {node.labels.get(GPU_MODEL_LABEL) for node in nodes}
    stranded = [job for job in constrained if present.isdisjoint(job.gpu_models)]
    if not stranded:
        return ()
    missing = sorted({model for job in stranded for model in job.gpu_models})
    return (
        f"{_counted(len(stranded), 'job')} only for GPU models no node has "
        f"({', '.join(missing)}): waiting to the end",
    )
