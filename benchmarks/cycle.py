"""One scheduling cycle at cluster scale, today's code against a baseline revision in the same run.

    python -m benchmarks.cycle                       # 4,096 nodes x 10,000 pending (~5 min)
    python -m benchmarks.cycle --quick               # 512 nodes x 1,000 pending (~20 s)
    python -m benchmarks.cycle --scale 4096:10000 --scale 4096:50000 --scale 16384:10000
    python -m benchmarks.cycle --baseline HEAD~5     # any git revision; "none" skips it
    python -m benchmarks.cycle --markdown

**Workload** (seeded, :func:`workload`): nodes of 8 GPUs under spine ⊃ block (128 nodes) ⊃ rack
(16 nodes); 50 teams whose guarantees add up to 80% of the GPUs (LendAndBorrow, borrow limit
50%, three priority classes); pending jobs of 1–64 whole nodes (most small, a few large), 30%
required to fit one block, 30% preferring one, the rest unconstrained, submitted one per second.

**Cycles**, each timed in CPU seconds of ``core.cycle.schedule`` alone (the snapshot is built
outside the timer), with the garbage collector as ``topoq server``'s controller has it (its
young threshold raised, everything alive frozen before each cycle: ``bootstrap``'s
``GarbageBetweenSteps``), for both revisions alike:

- ``cold``: every job pending on an empty cluster;
- ``one ended``: the cluster as the cold cycle left it (its admissions running), after one
  running job ended — what a busy cluster pays every few seconds; ``--rounds`` times (20 by
  default), a different job ending each time and each cycle's decisions applied before the
  next, reported as the median (p50) and the 99th percentile (with 20 rounds: the slowest);
- ``unchanged``: the last snapshot again, nothing changed since.

Today's code runs each cycle with ``schedule_with_parking``, handing each cycle's ``Parking`` to
the next as the controller and the simulator do (ADR 0007); a revision without it runs
``schedule``. A revision whose shells keep a ``PhaseIndex`` hands each snapshot its jobs sorted
out by it (``Snapshot.by_phase``, brought up to date by ``PhaseIndex.synced`` before the cycle,
not timed), as the controller's step does.

Each (revision, scale) runs in a child process of its own, so that memory (peak RSS) is its own
and the baseline runs its own code: its ``src/`` is extracted with ``git archive`` and put first
on the child's ``PYTHONPATH``; the workload is built by this module, with the builders both
revisions have (``topoq.testing.governance``). A benchmark, not a timed test: it prints numbers
and never fails on them.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

import topoq.core.cycle as cycle_module
from topoq.core.cycle import Snapshot
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import build_tree
from topoq.domain.job import JobPhase
from topoq.testing.builders import BLOCK
from topoq.testing.governance import gpu_cluster, job, policy, team

GC_YOUNG_THRESHOLD = 10_000
"""The controller's young-generation threshold (``topoq.bootstrap.GC_YOUNG_THRESHOLD``; kept
here so that a baseline revision is measured with the same)."""
BASELINE_REVISION = "2582b26"
"""The code before issue 10's work on the cycle (issue 9's semantics, unoptimised)."""
DEFAULT_SCALES = ((4096, 10_000),)
QUICK_SCALES = ((512, 1_000),)
SHAPES = {64: (1, 2, 2, 16), 512: (1, 4, 8, 16), 4096: (4, 8, 8, 16), 16384: (16, 8, 8, 16)}
"""Nodes → spines, blocks per spine, racks per block, nodes per rack."""
TEAMS = 50
SEED = 20261201
NODE_COUNTS = (1, 1, 1, 1, 2, 2, 4, 8, 16, 32, 64)
CLASSES = {"low": 10, "normal": 50, "high": 90}
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Measured:
    revision: str
    nodes: int
    pending: int
    cold_s: float
    cold_admitted: int
    one_ended_s: float
    """The median over the rounds."""
    one_ended_p99_s: float
    one_ended_admitted: int
    """Admissions over all rounds."""
    unchanged_s: float
    peak_rss_mib: float

    @property
    def admissions_per_s(self) -> float:
        return self.cold_admitted / self.cold_s if self.cold_s > 0 else float("inf")


def workload(nodes: int, pending: int, seed: int = SEED):  # type: ignore[no-untyped-def]
    """The tree, the policy and the pending jobs, built with the code under test."""

    shape = SHAPES[nodes]
    cluster_nodes, spec = gpu_cluster(list(shape))
    tree = build_tree(cluster_nodes, spec)
    rng = random.Random(seed)
    total_gpus = nodes * 8
    weights = [rng.uniform(0.5, 1.5) for _ in range(TEAMS)]
    guarantees = [int(0.8 * total_gpus * w / sum(weights)) // 8 * 8 for w in weights]
    teams = [team(f"team-{i:02d}", g, weight=1 + i % 3) for i, g in enumerate(guarantees)]
    rules = policy(*teams, classes=CLASSES)
    jobs = {}
    for index in range(pending):
        count = rng.choice(NODE_COUNTS)
        draw = rng.random()
        topology = {"required": BLOCK} if draw < 0.3 else {"preferred": BLOCK} if draw < 0.6 else {}
        view = job(
            f"j{index:05d}",
            f"team-{rng.randrange(TEAMS):02d}",
            count,
            priority=rng.choice(list(CLASSES)),
            at=float(index),
            **topology,
        )
        jobs[view.id] = view
    return tree, rules, jobs


def measure(revision: str, nodes: int, pending: int, rounds: int = 20) -> Measured:
    """The cycles on the code importable here (run in the child process)."""

    tree, rules, jobs = workload(nodes, pending)
    now = float(pending)
    schedule_with_parking = _scheduler()
    parking = None
    sorted_out = _sorter()

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

    def timed(views: dict) -> tuple[float, object]:  # type: ignore[type-arg]
        nonlocal parking
        snapshot = Snapshot(now, tree, tuple(views.values()), rules, **sorted_out(views))
        gc.collect()  # between steps, as the controller does
        gc.freeze()
        began = time.process_time()
        result, parking = schedule_with_parking(snapshot, parking)
        return time.process_time() - began, result

    cold_s, cold = timed(jobs)
    jobs = apply_cycle(jobs, cold, now=now, start_at_once=True)  # type: ignore[arg-type]
    ended_s, admitted = [], 0
    for index in range(rounds):
        running = sorted(j for j, v in jobs.items() if v.phase is JobPhase.RUNNING)
        if running:
            ended = running[(len(running) // 2 + 7 * index) % len(running)]
            jobs[ended] = advance(jobs[ended], JobPhase.SUCCEEDED, now=now, cause="exited 0")
        spent, result = timed(jobs)
        ended_s.append(spent)
        admitted += len(result.admissions)  # type: ignore[attr-defined]
        jobs = apply_cycle(jobs, result, now=now, start_at_once=True)  # type: ignore[arg-type]
    last = Snapshot(now, tree, tuple(jobs.values()), rules, **sorted_out(jobs))
    _, parking = schedule_with_parking(last, parking)
    began = time.process_time()
    schedule_with_parking(last, parking)  # the same snapshot: nothing changed since
    unchanged_s = time.process_time() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ended_s.sort()
    return Measured(
        revision,
        nodes,
        pending,
        cold_s,
        len(cold.admissions),  # type: ignore[attr-defined]
        statistics.median(ended_s),
        ended_s[min(len(ended_s) - 1, math.ceil(0.99 * len(ended_s)) - 1)],
        admitted,
        unchanged_s,
        peak,
    )


def _sorter():  # type: ignore[no-untyped-def]
    """What a snapshot of ``views`` is handed besides its jobs, as the revision's controller
    hands it: its jobs sorted out by a ``PhaseIndex`` synced with each read (``by_phase``),
    or nothing for a revision without one."""
    kept = getattr(cycle_module, "PhaseIndex", None)
    index = kept() if kept is not None else None
    if index is None or not hasattr(index, "synced"):
        return lambda views: {}
    return lambda views: {"by_phase": index.synced(views)}


def _scheduler():  # type: ignore[no-untyped-def]
    """``schedule_with_parking``, or for a revision without it ``schedule`` in its shape."""
    found = getattr(cycle_module, "schedule_with_parking", None)
    if found is not None:
        return found

    def schedule_with_parking(snapshot, parking=None):  # type: ignore[no-untyped-def]
        return cycle_module.schedule(snapshot), None

    return schedule_with_parking


def extract(revision: str, into: Path) -> Path:
    """``src/`` of ``revision`` (git archive), to put first on a child's PYTHONPATH."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "src"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run_child(
    revision: str, source: Path | None, nodes: int, pending: int, rounds: int
) -> Measured:
    found = child_result(
        "benchmarks.cycle", revision, source, str(nodes), str(pending), str(rounds)
    )
    return Measured(**found)


def child_result(module: str, revision: str, source: Path | None, *arguments: str) -> Any:
    """What ``python -m module --child revision arguments...`` printed last, as JSON: a
    benchmark's measurement of one revision in a process of its own, with ``source`` (the
    revision's extracted ``src/``, None: today's) first on its path."""
    environment = dict(os.environ)
    paths = [str(source)] if source is not None else []
    environment["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO)])
    command = [sys.executable, "-m", module, "--child", revision, *arguments]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: the {revision} run failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: Sequence[Measured], *, markdown: bool = False) -> str:
    if markdown:
        lines = [
            "| revision | nodes | pending | cold | admitted | admissions/s | one ended p50 |"
            " one ended p99 | unchanged | peak RSS |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        lines += [
            f"| {r.revision} | {r.nodes:,} | {r.pending:,} | {r.cold_s:.2f} s | "
            f"{r.cold_admitted:,} | {r.admissions_per_s:,.0f} | {r.one_ended_s:.3f} s | "
            f"{r.one_ended_p99_s:.3f} s | {r.unchanged_s:.4f} s | {r.peak_rss_mib:,.0f} MiB |"
            for r in rows
        ]
        return "\n".join(lines) + "\n"
    out = Table(box=box.SIMPLE_HEAVY, title="one scheduling cycle (CPU time of schedule)")
    columns = ("revision", "nodes", "pending", "cold", "admitted", "adm/s", "1 ended p50", "p99")
    for column in columns:
        out.add_column(column, justify="left" if column == "revision" else "right")
    out.add_column("unchanged", justify="right")
    out.add_column("peak RSS", justify="right")
    for r in rows:
        out.add_row(
            r.revision,
            f"{r.nodes:,}",
            f"{r.pending:,}",
            f"{r.cold_s:.2f} s",
            f"{r.cold_admitted:,}",
            f"{r.admissions_per_s:,.0f}",
            f"{r.one_ended_s:.3f} s",
            f"{r.one_ended_p99_s:.3f} s",
            f"{r.unchanged_s:.4f} s",
            f"{r.peak_rss_mib:,.0f} MiB",
        )
    console = Console(file=io.StringIO(), width=120)
    console.print(out)
    return console.file.getvalue()  # type: ignore[attr-defined]


def ratios(rows: Sequence[Measured]) -> list[str]:
    """Per scale, how many times faster today's code is than the baseline."""
    lines = []
    by_scale: dict[tuple[int, int], dict[str, Measured]] = {}
    for row in rows:
        by_scale.setdefault((row.nodes, row.pending), {})[row.revision] = row
    for (nodes, pending), found in by_scale.items():
        now, then = found.get("today"), next((r for k, r in found.items() if k != "today"), None)
        if now is None or then is None:
            continue
        parts = [
            f"{name} {old / new:.1f}x" if new > 0 else f"{name} -"
            for name, old, new in (
                ("cold", then.cold_s, now.cold_s),
                ("one ended p50", then.one_ended_s, now.one_ended_s),
                ("one ended p99", then.one_ended_p99_s, now.one_ended_p99_s),
                ("unchanged", then.unchanged_s, now.unchanged_s),
            )
        ]
        lines.append(
            f"{nodes:,} nodes x {pending:,} pending, speed-up over baseline: " + ", ".join(parts)
        )
    return lines + growth(rows)


def growth(rows: Sequence[Measured]) -> list[str]:
    """How each revision's cycles grow with the queue and with the cluster: the exponent k of
    time ~ size^k between two scales that differ in one of them (1: linear, 0: flat)."""
    lines = []
    for first in rows:
        for second in rows:
            if first.revision != second.revision or first is second:
                continue
            if first.nodes == second.nodes and first.pending < second.pending:
                what, ratio = "pending", second.pending / first.pending
            elif first.pending == second.pending and first.nodes < second.nodes:
                what, ratio = "nodes", second.nodes / first.nodes
            else:
                continue
            parts = [
                f"{name} {math.log(b / a) / math.log(ratio):.2f}"
                for name, a, b in (
                    ("cold", first.cold_s, second.cold_s),
                    ("one ended p50", first.one_ended_s, second.one_ended_s),
                    ("one ended p99", first.one_ended_p99_s, second.one_ended_p99_s),
                )
                if a > 0 and b > 0
            ]
            lines.append(
                f"{first.revision}: growth with {what} ({first.nodes:,}x{first.pending:,} -> "
                f"{second.nodes:,}x{second.pending:,}, {ratio:g}x): " + ", ".join(parts)
            )
    return lines


def parse_scale(text: str) -> tuple[int, int]:
    nodes, _, pending = text.partition(":")
    if not nodes.isdigit() or not pending.isdigit() or int(nodes) not in SHAPES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give NODES:PENDING with NODES one of {', '.join(map(str, SHAPES))}"
        )
    return int(nodes), int(pending)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cycle",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", action="append", type=parse_scale, metavar="NODES:PENDING")
    parser.add_argument("--quick", action="store_true", help="512 nodes x 1,000 pending")
    parser.add_argument("--baseline", default=BASELINE_REVISION, help='a git revision, or "none"')
    parser.add_argument("--rounds", type=int, default=20, help="one-ended cycles (default 20)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        revision, nodes, pending, rounds = options.child
        print(json.dumps(asdict(measure(revision, int(nodes), int(pending), int(rounds)))))
        return
    scales = options.scale or (QUICK_SCALES if options.quick else DEFAULT_SCALES)
    rows = []
    with tempfile.TemporaryDirectory(prefix="topoq-cycle-baseline-") as scratch:
        source = None
        if options.baseline != "none":
            source = extract(options.baseline, Path(scratch))
        for nodes, pending in scales:
            if source is not None:
                rows.append(run_child(options.baseline, source, nodes, pending, options.rounds))
            rows.append(run_child("today", None, nodes, pending, options.rounds))
    print(table(rows, markdown=options.markdown), end="")
    for line in ratios(rows):
        print(line)


if __name__ == "__main__":
    main()
