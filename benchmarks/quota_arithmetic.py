"""The cycle's quota and capacity arithmetic per operation, today's code against a baseline
revision in the same run.

    python -m benchmarks.quota_arithmetic                  # 4,096 and 8,192 nodes (~2 min)
    python -m benchmarks.quota_arithmetic --nodes 64       # a quick look
    python -m benchmarks.quota_arithmetic --baseline HEAD~3  # any git revision

**Workload** (seeded): nodes of 8 GPUs under spine ⊃ block (128 nodes) ⊃ rack (16 nodes);
50 teams whose guarantees add up to 80% of the GPUs (LendAndBorrow, borrow limit 50%); jobs
of 1–64 whole nodes, one every fourth node, put on the cluster by one cold cycle (their
admissions run). Not timed; the operations below are, each in a loop, in microseconds of
CPU per call:

- ``new book, one check``: a ``QuotaBook`` of the holders' usage and its first check (what
  every cycle, and every remedy tried on another policy, pays before its first answer);
- ``check``: ``QuotaBook.check`` of every team for one node's and 16 nodes' worth of work,
  worked out (the books' memo cleared before each);
- ``check, asked again``: the same checks on books that did not change since (memoized
  today);
- ``remedy tried``: the books under a policy with one team's borrow limit raised, and its
  check (what a waiting job's remedies try): today ``QuotaBook.under``, a revision without
  it builds a new book;
- ``charge+release``: a team takes a job's quota and gives it back (on a copy);
- ``copy``: ``QuotaBook.copy`` (every trial and every hold);
- ``figures``: ``borrowed``, ``lendable`` and ``within_guarantee`` of every team;
- ``ledger rebuilt``: the per-cycle ledger from every holder's allocation (``ledger_after``);
- ``ledger, one ended``: the same once one holder ended, derived from the previous cycle's
  prepared ledger (``prepared_ledger(..., previous)``; a revision without it rebuilds);
- ``ledger without nodes``: a copy without one block's nodes (held for a gang): today
  ``CapacityLedger.without``, a revision without it copies ``free`` and builds a ledger.

Each revision runs in a child process of its own on its own code (``src/`` extracted with
``git archive``, as :mod:`benchmarks.cycle` does). A benchmark, not a timed test: it prints
numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.cycle import REPO, extract
from topoq.core import holdings
from topoq.core.cycle import Snapshot, schedule
from topoq.core.holdings import capacity_by_flavor, ledger_after, usage_by_team
from topoq.core.ledger import CapacityLedger
from topoq.core.lifecycle import apply_cycle
from topoq.core.quota import QuotaBook
from topoq.core.tree import build_tree
from topoq.domain.governance import FlavorName
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.testing.governance import P5, gpu_cluster, job, policy, team

BASELINE_REVISION = "f9f1774"
"""The code before the quota books kept their figures in arrays (issue 10)."""
DEFAULT_NODES = (4096, 8192)
SHAPES = {64: (1, 2, 2, 16), 512: (1, 4, 8, 16), 4096: (4, 8, 8, 16), 8192: (8, 8, 8, 16)}
"""Nodes → spines, blocks per spine, racks per block, nodes per rack."""
TEAMS = 50
SEED = 20261201
NODE_COUNTS = (1, 1, 1, 1, 2, 2, 4, 8, 16, 32, 64)
MIN_TIME_S = 0.2
"""Each operation is repeated until it took this long (at least three times)."""
OPERATIONS = (
    "new book, one check",
    "check",
    "check, asked again",
    "remedy tried",
    "charge+release",
    "copy",
    "figures",
    "ledger rebuilt",
    "ledger, one ended",
    "ledger without nodes",
)


def per_call_us(operation: Callable[[], object]) -> float:
    """CPU microseconds per call of ``operation``, repeated for ``MIN_TIME_S``."""
    calls, began = 0, time.process_time()
    while calls < 3 or time.process_time() - began < MIN_TIME_S:
        operation()
        calls += 1
    return (time.process_time() - began) / calls * 1e6


def measure(nodes: int) -> dict[str, float]:
    """Microseconds per call of each operation on the code importable here (in the child)."""
    cluster_nodes, spec = gpu_cluster(list(SHAPES[nodes]))
    tree = build_tree(cluster_nodes, spec)
    rng = random.Random(SEED)
    weights = [rng.uniform(0.5, 1.5) for _ in range(TEAMS)]
    guarantees = [int(0.8 * nodes * 8 * w / sum(weights)) // 8 * 8 for w in weights]
    rules = policy(*(team(f"team-{i:02d}", g) for i, g in enumerate(guarantees)))
    jobs = {}
    for index in range(max(nodes // 4, 8)):
        view = job(f"j{index:05d}", f"team-{rng.randrange(TEAMS):02d}", rng.choice(NODE_COUNTS))
        jobs[view.id] = view
    admitted = schedule(Snapshot(0.0, tree, tuple(jobs.values()), rules))
    running = apply_cycle(jobs, admitted, now=0.0, start_at_once=True)
    holders = [view for view in running.values() if view.phase.holds_capacity]
    capacity = capacity_by_flavor(tree, INSTANCE_TYPE_LABEL)
    usage = usage_by_team(holders)
    book = QuotaBook(rules, capacity, usage)
    flavor, names = FlavorName(P5), [spec.name for spec in rules.teams]
    demands = [job("d", "team-00", count).spec.workload.total_requests for count in (1, 16)]

    def checks() -> None:
        for name in names:
            for demand in demands:
                book.memo.clear()
                book.check(name, flavor, demand)

    def checks_again() -> None:
        for name in names:
            for demand in demands:
                book.check(name, flavor, demand)

    trial = book.copy()

    def charge_and_release() -> None:
        for name in names:
            trial.charge(name, flavor, demands[1])
            trial.release(name, flavor, demands[1])

    def figures() -> None:
        for name in names:
            book.borrowed(name, flavor)
            book.lendable(name, flavor)
            book.within_guarantee(name, flavor, demands[0])

    raised = replace(rules.teams[0].quotas[0], borrow_limit=demands[1])
    remedy = replace(rules, teams=(replace(rules.teams[0], quotas=(raised,)), *rules.teams[1:]))

    def remedy_tried() -> None:
        if hasattr(book, "under"):
            trial = book.under(remedy, names[0], flavor)
        else:
            trial = QuotaBook(remedy, capacity, book.usage)
        trial.check(names[0], flavor, demands[1])

    per_team = len(names)
    found = {
        "new book, one check": per_call_us(
            lambda: QuotaBook(rules, capacity, usage).check(names[0], flavor, demands[0])
        ),
        "check": per_call_us(checks) / (per_team * len(demands)),
        "check, asked again": per_call_us(checks_again) / (per_team * len(demands)),
        "remedy tried": per_call_us(remedy_tried),
        "charge+release": per_call_us(charge_and_release) / per_team,
        "copy": per_call_us(book.copy),
        "figures": per_call_us(figures) / per_team,
        "ledger rebuilt": per_call_us(lambda: ledger_after(tree, holders)),
    }
    found |= _ledger_figures(tree, holders)
    return found


def _ledger_figures(tree, holders) -> dict[str, float]:  # type: ignore[no-untyped-def]  # either revision's types
    """The derived ledgers, each the way the revision under test can make it."""
    ledger = ledger_after(tree, holders)
    block = np.arange(min(128, len(tree.nodes)), dtype=np.int64)
    amounts = np.asarray(tree.capacity[block], dtype=np.int64)
    later = holders[: len(holders) // 2] + holders[len(holders) // 2 + 1 :]
    prepare = getattr(holdings, "prepared_ledger", None)
    if prepare is None:
        one_ended = per_call_us(lambda: ledger_after(tree, later))
    else:
        previous = prepare(tree, holders)
        one_ended = per_call_us(lambda: prepare(tree, later, previous).ledger())
    if hasattr(CapacityLedger, "without"):
        without = per_call_us(lambda: ledger.without(block, amounts))
    else:

        def rebuilt_without() -> CapacityLedger:
            free = ledger.free.copy()
            free[block] = np.maximum(free[block] - amounts, 0)
            return CapacityLedger(tree, free)

        without = per_call_us(rebuilt_without)
    return {"ledger, one ended": one_ended, "ledger without nodes": without}


def run_child(source: Path | None, nodes: int) -> dict[str, float]:
    """``measure(nodes)`` in a child process, on ``source``'s code (today's when None)."""
    environment = dict(os.environ)
    paths = [str(source)] if source is not None else []
    environment["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO)])
    command = [sys.executable, "-m", "benchmarks.quota_arithmetic", "--child", str(nodes)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: the run on {nodes} nodes failed:\n{done.stderr.strip()}")
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def table(
    baseline: str, rows: Sequence[tuple[int, dict[str, float] | None, dict[str, float]]]
) -> str:
    """Per scale and operation: the baseline's and today's µs per call, and the speed-up."""
    out = Table(box=box.SIMPLE_HEAVY, title="quota and capacity arithmetic (CPU µs per call)")
    for column in ("nodes", "operation", baseline, "today", "speed-up"):
        out.add_column(column, justify="left" if column == "operation" else "right")
    for nodes, then, now in rows:
        for operation in OPERATIONS:
            old = then.get(operation) if then is not None else None
            new = now[operation]
            out.add_row(
                f"{nodes:,}",
                operation,
                f"{old:,.1f}" if old is not None else "-",
                f"{new:,.1f}",
                f"{old / new:.1f}x" if old is not None and new > 0 else "-",
            )
    console = Console(file=io.StringIO(), width=100)
    console.print(out)
    return console.file.getvalue()  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quota_arithmetic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", action="append", type=int, choices=sorted(SHAPES))
    parser.add_argument("--baseline", default=BASELINE_REVISION, help='a git revision, or "none"')
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(measure(options.child)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="topoq-quota-baseline-") as scratch:
        source = None if options.baseline == "none" else extract(options.baseline, Path(scratch))
        for nodes in options.nodes or DEFAULT_NODES:
            then = run_child(source, nodes) if source is not None else None
            rows.append((nodes, then, run_child(None, nodes)))
    print(table(options.baseline, rows), end="")


if __name__ == "__main__":
    main()
