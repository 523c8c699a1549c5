"""``topoq simulate`` on a long scenario, today's code against a baseline revision in the same run.

    python -m benchmarks.simulation                    # fair-share-at-scale, 12,000 jobs, 20,000 s
    python -m benchmarks.simulation --quick            # its first 2,000 s (1,200 jobs, ~30 s)
    python -m benchmarks.simulation --until 4000       # its first 4,000 s
    python -m benchmarks.simulation --scenario examples/scenarios/fair-share.yaml
    python -m benchmarks.simulation --baseline HEAD~3  # any git revision; "none" skips it
    python -m benchmarks.simulation --markdown
    python -m benchmarks.simulation --trace ../shared/traces/philly_2017/philly_jobs_sia.csv.gz
    python -m benchmarks.simulation --trace FILE --limit 20000 --nodes 128
    python -m benchmarks.simulation --baseline c3cf13d  # against the simulator's own shell

**A trace** instead (``--trace``: a Philly 2017 or ITP 2021 file, ``topoq.sim.traces``): its
jobs (``--limit``: the first N by arrival) on the cluster and policy derived from it, or on
``--nodes`` 8-GPU nodes (ITP's one team guaranteed them all), replayed as ``topoq simulate --trace``
does; the baseline defaults to ``TRACE_BASELINE``, the first revision that read traces. Issue
14's target: the whole Philly trace, and the whole ITP trace on 1,024 GPUs, each in under 60 s.

**Scenario**: ``examples/scenarios/fair-share-at-scale.yaml`` (three teams weighted 1:2:3, each
submitting an 8-GPU job of 300 s every 5 s on 64 nodes), or any scenario file; ``--until`` keeps
the events up to that time and ends the run there.

**Since the simulator runs the server's controller** (issue 14 §1): a run is
``Simulation.run``, the controller's steps on a virtual clock, and ``schedule`` is the cycles
those steps ran. ``--baseline c3cf13d``, the last revision with the simulator's own shell
around the core, compares the two shells on the same scenario: both must log the same.

**Measured**, in CPU seconds of the child process: the whole run (``Simulation.run``: every
cycle, the decision log, the summary; reading the scenario file is not counted), and the part
spent in the scheduling cycle the simulator calls (``schedule_with_parking``, or ``schedule``
in a revision that calls that). The rest is the simulator's own work: what it does per cycle
around the core (the snapshot, applying decisions, fair-share usage, the log) and at the end.

Each revision runs in a child process of its own, with its ``src/`` extracted by ``git
archive`` (``benchmarks.cycle.extract``), so that each runs its own simulator and core; both
must decide the same, which the ``same log`` column checks (the JSON lines of both logs are
hashed). A benchmark, not a timed test: it prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.cycle import REPO, child_result, extract
from topoq.sim import engine, load_scenario

BASELINE_REVISION = "f9f1774"
"""The simulator before issue 10's work on it: every job ever submitted in every snapshot."""
SCENARIO = REPO / "examples" / "scenarios" / "fair-share-at-scale.yaml"
QUICK_UNTIL_S = 2000.0
TARGET_S = 30.0
"""Issue 10: the whole 12,000-job scenario simulated in under 30 s."""
TRACE_BASELINE = "0dc51eb"
"""The first revision that replayed traces (before the cycle's per-holder passes were cut)."""
TRACE_TARGET_S = 60.0
OWN_SHELL_REVISION = "c3cf13d"
"""The last revision whose simulator ran a shell of its own around the core."""
CYCLE_FUNCTIONS = ("schedule_with_parking", "schedule")
"""What the simulator may call a cycle through, newest first."""


@dataclass(frozen=True)
class Measured:
    revision: str
    scenario: str
    simulated_s: float
    jobs: int
    cycles: int
    total_s: float
    schedule_s: float
    peak_rss_mib: float
    log_digest: str

    @property
    def own_s(self) -> float:
        return self.total_s - self.schedule_s


@dataclass(frozen=True)
class TraceRun:
    """A trace to replay instead of a scenario file."""

    limit: int | None = None
    nodes: int | None = None


def measure(
    revision: str, path: Path, until_s: float | None, trace: TraceRun | None = None
) -> Measured:
    """One run on the code importable here (in the child process)."""
    scenario = load_scenario(path) if trace is None else _trace_scenario(path, trace)
    if until_s is not None:
        events = tuple(event for event in scenario.events if event.at_s <= until_s)
        scenario = replace(scenario, events=events, until_s=until_s)
    spent = [0.0]
    # the cycles a run calls: through the simulator's own shell (a revision before it ran the
    # controller), else through the controller's step
    timed_in: Any = engine
    if not any(hasattr(engine, name) for name in CYCLE_FUNCTIONS):
        from topoq.engine import controller  # noqa: PLC0415  (a revision that has one)

        timed_in = controller
    name = next(name for name in CYCLE_FUNCTIONS if hasattr(timed_in, name))
    setattr(timed_in, name, _timed(getattr(timed_in, name), spent))
    logging.disable(logging.WARNING)  # the controller logs every job's end
    began = time.process_time()
    result = engine.Simulation(scenario).run()
    total = time.process_time() - began
    digest = hashlib.sha256("\n".join(result.log_lines()).encode()).hexdigest()
    return Measured(
        revision,
        scenario.name,
        result.end_s,
        sum(1 for entry in result.log if entry.decision == "submit"),
        result.cycles,
        total,
        spent[0],
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        digest[:12],
    )


def _trace_scenario(path: Path, trace: TraceRun) -> Any:
    """The trace as ``topoq simulate --trace`` replays it (``nodes``: on that many 8-GPU
    nodes, ITP's one team guaranteed them all)."""
    from topoq.sim import traces  # noqa: PLC0415  (a revision before traces has none)

    read = traces.read_trace(path, limit=trace.limit)
    if trace.nodes is None:
        return traces.trace_scenario(read)
    make = getattr(traces, "cluster_of", None)
    if make is None:  # the first revision that read traces: derived from a job that size
        sizing = traces.TraceJob("size", "size", 0.0, 1.0, trace.nodes * traces.GPUS_PER_NODE, 2)
        nodes, topology = traces.derived_cluster(replace(read, jobs=(sizing,), guarantees={}))
    else:
        nodes, topology = make(trace.nodes)
    return traces.trace_scenario(read, (nodes, topology), traces.derived_policy(read, len(nodes)))


def _timed(function: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def timed(*arguments: Any) -> Any:
        began = time.process_time()
        try:
            return function(*arguments)
        finally:
            spent[0] += time.process_time() - began

    return timed


def run_child(
    revision: str,
    source: Path | None,
    path: Path,
    until_s: float | None,
    trace: TraceRun | None = None,
) -> Measured:
    arguments = ["--scenario", str(path)] if trace is None else ["--trace", str(path)]
    if until_s is not None:
        arguments += ["--until", str(until_s)]
    if trace is not None and trace.limit is not None:
        arguments += ["--limit", str(trace.limit)]
    if trace is not None and trace.nodes is not None:
        arguments += ["--nodes", str(trace.nodes)]
    return Measured(**child_result("benchmarks.simulation", revision, source, *arguments))


def run(
    baseline: str, path: Path, until_s: float | None, trace: TraceRun | None = None
) -> list[Measured]:
    """The baseline revision's run (unless it is "none"), then today's, each in a child."""
    with tempfile.TemporaryDirectory(prefix="topoq-simulation-baseline-") as scratch:
        sources = [] if baseline == "none" else [(baseline, extract(baseline, Path(scratch)))]
        return [
            run_child(revision, source, path, until_s, trace)
            for revision, source in [*sources, ("today", None)]
        ]


_HEADINGS = (
    "revision",
    "simulated",
    "jobs",
    "cycles",
    "total CPU",
    "schedule",
    "simulator",
    "simulator share",
    "peak RSS",
    "log",
)


def _cells(r: Measured) -> tuple[str, ...]:
    share = r.own_s / r.total_s if r.total_s > 0 else 0.0
    return (
        r.revision,
        f"{r.simulated_s:,.0f} s",
        f"{r.jobs:,}",
        f"{r.cycles:,}",
        f"{r.total_s:.2f} s",
        f"{r.schedule_s:.2f} s",
        f"{r.own_s:.2f} s",
        f"{share:.0%}",
        f"{r.peak_rss_mib:,.0f} MiB",
        r.log_digest,
    )


def table(rows: Sequence[Measured], *, markdown: bool = False) -> str:
    if markdown:
        lines = ["| " + " | ".join(_HEADINGS) + " |", "|---|" + "--:|" * (len(_HEADINGS) - 1)]
        lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    title = f"topoq simulate {rows[0].scenario} (CPU time)" if rows else "topoq simulate"
    out = Table(box=box.SIMPLE_HEAVY, title=title)
    for heading in _HEADINGS:
        out.add_column(heading, justify="left" if heading in ("revision", "log") else "right")
    for row in rows:
        out.add_row(*_cells(row))
    console = Console(file=io.StringIO(), width=140)
    console.print(out)
    return console.file.getvalue()  # type: ignore[attr-defined]


def verdicts(rows: Sequence[Measured], trace: TraceRun | None = None) -> list[str]:
    """Whether the revisions decided the same, the simulator's own speed-up, and the target."""
    lines = []
    today = next((row for row in rows if row.revision == "today"), None)
    baseline = next((row for row in rows if row.revision != "today"), None)
    if today is not None and baseline is not None:
        same = "the same log" if today.log_digest == baseline.log_digest else "DIFFERENT logs"
        speed = f"{baseline.own_s / today.own_s:.1f}x" if today.own_s > 0 else "-"
        lines.append(
            f"{same} as {baseline.revision}; the simulator's own work {speed} cheaper "
            f"({baseline.own_s:.2f} s -> {today.own_s:.2f} s)"
        )
    if today is not None:
        target = TARGET_S if trace is None else TRACE_TARGET_S
        met = "met" if today.total_s < target else "not met"
        rate = today.cycles / today.total_s if today.total_s > 0 else 0.0
        lines.append(
            f"target: {today.jobs:,} jobs over {today.simulated_s:,.0f} s simulated in under "
            f"{target:.0f} s CPU: {met} ({today.total_s:.1f} s, {rate:,.0f} cycles/s)"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.simulation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--trace", type=Path, help="replay a trace instead of a scenario")
    parser.add_argument("--limit", type=int, help="with --trace: its first N jobs")
    parser.add_argument("--nodes", type=int, help="with --trace: on this many 8-GPU nodes")
    parser.add_argument("--until", type=float, help="keep the events up to this time (s)")
    parser.add_argument("--quick", action="store_true", help=f"--until {QUICK_UNTIL_S:g}")
    parser.add_argument("--baseline", help='a git revision, or "none"')
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", metavar="REVISION", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    until_s = QUICK_UNTIL_S if options.quick and options.until is None else options.until
    trace = None if options.trace is None else TraceRun(options.limit, options.nodes)
    path = (options.scenario if options.trace is None else options.trace).resolve()
    if options.child:
        print(json.dumps(asdict(measure(options.child, path, until_s, trace))))
        return
    baseline = options.baseline or (BASELINE_REVISION if trace is None else TRACE_BASELINE)
    rows = run(baseline, path, until_s, trace)
    print(table(rows, markdown=options.markdown) + "\n".join(verdicts(rows, trace)))


if __name__ == "__main__":
    main()
