"""The controller's step on the real SQL store, today's code against a baseline in the same run.

    python -m benchmarks.controller_step                   # 4,096 nodes x 10,000 pending
    python -m benchmarks.controller_step --quick           # 512 nodes x 1,000 pending
    python -m benchmarks.controller_step --steps 30 --baseline none
    python -m benchmarks.controller_step --markdown

What a user's ``topoq server`` pays per step, in process: ``engine.controller.Controller.step``
on a ``SqlStore`` (a SQLite file in a temporary directory, WAL, ``synchronous=FULL``), with the
metrics the server feeds. **Workload**: ``benchmarks.cycle.workload`` (4,096 nodes of 8 GPUs, 50
teams, 10,000 pending jobs), the nodes, the policy and the jobs written to the store in bulk
(not timed). Steps run until one admits nothing (the cluster is full); then each **steady
step** follows one running job ending: the executor reports it EXITED (exit code 0), as the
local executor's ``poll`` would, and reports STARTED for the gangs the previous step started.
The virtual clock moves one second per step. With ``--after submit`` each steady step follows
one submission instead (a sweep reaching a full cluster): a job alike a waiting one, of a
team and shape picked at random among them, submitted through the controller's intake.

Between steps the benchmark does what the revision's controller process does
(``topoq.server.loop.GarbageBetweenSteps``, when it has it: frozen survivors, full
collections between steps). The executor records launches instead of running processes
(``testing.fakes.ScriptedExecutor``): the local executor would run one process per pod, some
4,000 of them on a full cluster, which measures the machine rather than the step; the
executor's calls are the same either way.

**Phases** (wall and CPU time, summed per step; whatever is not named is ``rest``: the diff, the
settled check, dispatch, usage bookkeeping): ``events`` (storing the executor's events: a read
and a write per event), ``read`` (nodes, jobs, policy, upstream phases), ``cycle``
(``schedule``/``schedule_with_parking``), ``apply`` (``apply_cycle``), ``commit`` (``save_jobs``
of the cycle's moves and decisions) and ``metrics`` (``Controller._observe``). Each revision
runs in a child process of its own (its own peak RSS); the baseline's ``src/`` is extracted with
``git archive`` (``benchmarks.cycle.extract``). A benchmark, not a timed test: it prints
numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import random
import resource
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

import topoq.engine.controller as controller_module
from benchmarks.cycle import SHAPES, child_result, extract, parse_scale, workload
from topoq.domain.job import JobId, JobPhase
from topoq.engine.controller import Controller
from topoq.engine.metrics import ControlPlaneMetrics
from topoq.engine.ports import ExecutorEventKind
from topoq.store import SqlStore, open_store
from topoq.store.submissions import Submission, SubmissionWriter
from topoq.store.transactions import Transactions
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.governance import gpu_cluster

BASELINE_REVISION = "f9f1774"
"""The controller before issue 10's work on the step (the cycle already made cheaper)."""
DEFAULT_SCALE = (4096, 10_000)
QUICK_SCALE = (512, 1_000)
DEFAULT_STEPS = 60
PHASES = ("events", "read", "cycle", "apply", "commit", "metrics", "rest")
SUBMISSION_BATCH = 500


@dataclass
class Measured:
    revision: str
    nodes: int
    pending: int
    fill_steps: int
    first_step_s: float
    admitted: int
    steady_admitted: int
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    phase_wall_s: dict[str, list[float]] = field(default_factory=dict)
    phase_cpu_s: dict[str, list[float]] = field(default_factory=dict)
    peak_rss_mib: float = 0.0


class PhaseClock:
    """Wall and CPU time per phase of the current step; a phase called inside another one
    counts for the outer one only."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self._depth = 0

    def timed(
        self, phase: str | Callable[..., str], call: Callable[..., Any]
    ) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return call(*args, **kwargs)
            self._depth += 1
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                name = phase(*args, **kwargs) if callable(phase) else phase
                self.wall[name] += time.perf_counter() - wall
                self.cpu[name] += time.process_time() - cpu
                self._depth -= 1

        return wrapper

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()


@contextlib.contextmanager
def _instrumented(clock: PhaseClock, store: Any, controller: Any) -> Iterator[None]:
    """Wrap what the step calls with the phase clock (whichever names this revision has),
    and put the controller module's functions back afterwards."""
    module: Any = controller_module
    originals = dict(vars(module))
    for name in ("nodes", "jobs", "policy", "phases_of", "fair_share_usage", "holding_jobs"):
        setattr(store, name, clock.timed("read", getattr(store, name)))
    store.job = clock.timed("events", store.job)
    store.save_jobs = clock.timed(
        lambda *a, decisions=None, **k: "events" if decisions is None else "commit",
        store.save_jobs,
    )
    for name in ("schedule", "schedule_with_parking"):
        if hasattr(module, name):
            setattr(module, name, clock.timed("cycle", getattr(module, name)))
    for name in ("apply_cycle", "cycle_moves"):
        if hasattr(module, name):
            setattr(module, name, clock.timed("apply", getattr(module, name)))
    controller._observe = clock.timed("metrics", controller._observe)
    try:
        yield
    finally:
        for name in ("schedule", "schedule_with_parking", "apply_cycle", "cycle_moves"):
            if name in originals:
                setattr(module, name, originals[name])


def filled_store(data_dir: Path, nodes: int, pending: int) -> tuple[SqlStore, Any]:
    """A store holding the workload's nodes, policy and pending jobs (written in bulk, a
    batch of submissions per transaction), and the topology."""
    cluster_nodes, topology = gpu_cluster(list(SHAPES[nodes]))
    _, rules, jobs = workload(nodes, pending)
    store = open_store(None, data_dir)
    store.save_nodes(cluster_nodes, actor="bench", now=0.0)
    store.save_policy(rules, actor="bench", now=0.0)
    writer = SubmissionWriter(Transactions(store.database))
    specs = [view.spec for view in jobs.values()]
    for start in range(0, len(specs), SUBMISSION_BATCH):
        batch = specs[start : start + SUBMISSION_BATCH]
        writer.commit([Submission(spec, spec.submitted_at) for spec in batch])
    return store, topology


class Cluster:
    """The executor's side: which gangs run, reported as the local executor would."""

    def __init__(self, executor: ScriptedExecutor, now: float) -> None:
        self.executor = executor
        self.now = now
        self.running: list[str] = []
        self._started: set[str] = set()

    def report_starts(self) -> None:
        """STARTED for every gang launched since the last call."""
        for launch in self.executor.launches:
            if launch.job.id not in self._started:
                self._started.add(launch.job.id)
                self.running.append(launch.job.id)
                self.executor.report(ExecutorEventKind.STARTED, launch.job.id, at=self.now)

    def end_one(self, rng: random.Random) -> None:
        if self.running:
            ended = self.running.pop(rng.randrange(len(self.running)))
            self.executor.report(ExecutorEventKind.EXITED, ended, exit_code=0, at=self.now)


def measure(revision: str, nodes: int, pending: int, steps: int, after: str = "end") -> Measured:
    """Fill the cluster, then time ``steps`` steady steps, each after one running job ended
    or one job was submitted (``after``; run in the child process)."""
    with tempfile.TemporaryDirectory(prefix="topoq-step-") as data_dir:
        store, topology = filled_store(Path(data_dir), nodes, pending)
        executor = ScriptedExecutor()
        cluster = Cluster(executor, float(pending))
        controller = Controller(
            store, executor, topology, clock=lambda: cluster.now, metrics=ControlPlaneMetrics()
        )
        measured = Measured(revision, nodes, pending, 0, 0.0, 0, 0)
        phases = PhaseClock()
        between_steps = server_garbage()
        with _instrumented(phases, store, controller):
            _fill(measured, controller, cluster, between_steps)
            change = cluster.end_one if after == "end" else _submitting(controller, cluster)
            _run_steady(measured, controller, cluster, phases, steps, between_steps, change)
        store.close()
    measured.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return measured


def server_garbage() -> Callable[[], None]:
    """What this revision's controller process does about garbage collection at its start
    and after every step (before ``topoq.server.loop.GarbageBetweenSteps``: nothing)."""
    for module_name in ("topoq.server.loop", "topoq.bootstrap"):  # where a revision has it
        try:
            module: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, "GarbageBetweenSteps"):
            module.settle_garbage_collector()
            return module.GarbageBetweenSteps().after_step  # type: ignore[no-any-return]
    return lambda: None


def _fill(
    measured: Measured,
    controller: Controller,
    cluster: Cluster,
    between_steps: Callable[[], None],
) -> None:
    """Steps (the gangs each starts reported STARTED) until one admits nothing."""
    while True:
        if measured.fill_steps:
            cluster.report_starts()
            cluster.now += 1.0
        began = time.perf_counter()
        admitted = len(controller.step().result.admissions)
        if not measured.fill_steps:
            measured.first_step_s = time.perf_counter() - began
        between_steps()
        measured.fill_steps += 1
        measured.admitted += admitted
        if not admitted:
            return


def _submitting(controller: Controller, cluster: Cluster) -> Callable[[random.Random], None]:
    """A change that submits one job alike a waiting one (its team and shape, a new id)."""
    waiting = [
        job.spec for job in controller.store.jobs().values() if job.phase is JobPhase.PENDING
    ]
    made = [0]

    def submit(rng: random.Random) -> None:
        like = rng.choice(waiting)
        made[0] += 1
        spec = replace(like, id=JobId(f"sweep-{made[0]}"), submitted_at=cluster.now)
        controller.intake.submit(spec, actor="bench")

    return submit


def _run_steady(
    measured: Measured,
    controller: Controller,
    cluster: Cluster,
    phases: PhaseClock,
    steps: int,
    between_steps: Callable[[], None],
    change: Callable[[random.Random], None],
) -> None:
    """``steps`` timed steps, each after ``change`` (one running job ended, or one job
    submitted)."""
    rng = random.Random(measured.pending)
    measured.phase_wall_s = {phase: [] for phase in PHASES}
    measured.phase_cpu_s = {phase: [] for phase in PHASES}
    for _ in range(steps):
        cluster.report_starts()
        change(rng)
        cluster.now += 1.0
        phases.reset()
        wall, cpu = time.perf_counter(), time.process_time()
        step = controller.step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        between_steps()  # as the server's loop does, outside the step
        measured.steady_admitted += len(step.result.admissions)
        measured.wall_s.append(wall)
        measured.cpu_s.append(cpu)
        _add_phases(measured, phases, wall, cpu)


def _add_phases(measured: Measured, phases: PhaseClock, wall: float, cpu: float) -> None:
    for phase in PHASES[:-1]:
        measured.phase_wall_s[phase].append(phases.wall.get(phase, 0.0))
        measured.phase_cpu_s[phase].append(phases.cpu.get(phase, 0.0))
    measured.phase_wall_s["rest"].append(wall - sum(phases.wall.values()))
    measured.phase_cpu_s["rest"].append(cpu - sum(phases.cpu.values()))


def run_child(
    revision: str, source: Path | None, nodes: int, pending: int, steps: int, after: str = "end"
) -> Measured:
    found = child_result(
        "benchmarks.controller_step", revision, source, str(nodes), str(pending), str(steps), after
    )
    return Measured(**found)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (p99 of 60 steps is their slowest but one)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def summary_rows(measured: Measured) -> list[list[str]]:
    """One row for the whole step and one per phase: p50/p99/max wall, p50 CPU (ms)."""

    def row(name: str, wall: Sequence[float], cpu: Sequence[float]) -> list[str]:
        return [
            measured.revision,
            name,
            *(f"{1000 * v:,.1f}" for v in (percentile(wall, 0.5), percentile(wall, 0.99))),
            f"{1000 * max(wall, default=0.0):,.1f}",
            f"{1000 * statistics.median(cpu):,.1f}" if cpu else "-",
            f"{1000 * percentile(cpu, 0.99):,.1f}",
        ]

    rows = [row("step", measured.wall_s, measured.cpu_s)]
    rows += [
        row(phase, measured.phase_wall_s[phase], measured.phase_cpu_s[phase]) for phase in PHASES
    ]
    return rows


COLUMNS = ("revision", "phase", "p50 ms", "p99 ms", "max ms", "CPU p50 ms", "CPU p99 ms")


def table(rows: Sequence[Measured], *, markdown: bool = False) -> str:
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|" + "--:|" * (len(COLUMNS) - 2)]
        lines += ["| " + " | ".join(r) + " |" for m in rows for r in summary_rows(m)]
        return "\n".join([*lines, "", *notes(rows)]) + "\n"
    out = Table(box=box.SIMPLE_HEAVY, title="one controller step, one job ended (SQLite)")
    for column in COLUMNS:
        out.add_column(column, justify="left" if column in ("revision", "phase") else "right")
    for measured in rows:
        for line in summary_rows(measured):
            out.add_row(*line)
        out.add_section()
    console = Console(file=io.StringIO(), width=120)
    console.print(out)
    return console.file.getvalue() + "\n".join(notes(rows)) + "\n"  # type: ignore[attr-defined]


def notes(rows: Sequence[Measured]) -> list[str]:
    return [
        f"{m.revision}: {m.nodes:,} nodes x {m.pending:,} pending, {len(m.wall_s)} steady steps;"
        f" fill: {m.fill_steps} steps, {m.admitted:,} admitted, first step {m.first_step_s:.2f} s;"
        f" steady admissions {m.steady_admitted}; peak RSS {m.peak_rss_mib:,.0f} MiB"
        for m in rows
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.controller_step",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", type=parse_scale, metavar="NODES:PENDING")
    parser.add_argument("--quick", action="store_true", help="512 nodes x 1,000 pending")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="steady steps timed")
    parser.add_argument("--baseline", default=BASELINE_REVISION, help='a git revision, or "none"')
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--after",
        choices=("end", "submit"),
        default="end",
        help="what each steady step follows: a running job ending (default) or a submission",
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        revision, nodes, pending, steps, after = options.child
        measured = measure(revision, int(nodes), int(pending), int(steps), after)
        print(json.dumps(asdict(measured)))
        return
    nodes, pending = options.scale or (QUICK_SCALE if options.quick else DEFAULT_SCALE)
    rows = []
    with tempfile.TemporaryDirectory(prefix="topoq-step-baseline-") as scratch:
        if options.baseline != "none":
            source = extract(options.baseline, Path(scratch))
            rows.append(
                run_child(options.baseline, source, nodes, pending, options.steps, options.after)
            )
        rows.append(run_child("today", None, nodes, pending, options.steps, options.after))
    print(table(rows, markdown=options.markdown), end="")


if __name__ == "__main__":
    main()
