"""First come against shortest-job-first on Philly's virtual clusters (issue 14 §8): the same
arrivals under ``queueOrder: submission`` and ``queueOrder: shortest-first``, waits per team.

    python -m benchmarks.queue_order                  # the whole Philly 2017 trace
    python -m benchmarks.queue_order --limit 20000 --markdown

**Trace**: ``../shared/traces/philly_2017/philly_jobs_sia.csv.gz`` (Sia's processing of
Microsoft Philly, CC-BY-4.0), its first ``--limit`` jobs by arrival. **Time limits**: the
traces record none; each job gets its duration × ``--time-limit-factor`` (default 1.5), so
shortest-first orders by the true durations — the oracle SJF published studies use — and
waiting gangs get expected starts for backfill under either order.
**Policies**, each under both orders:

- *shared*: the derived policy (each of the 11 sized virtual clusters guaranteed its nodes,
  every team lending what it leaves idle and borrowing up to the whole cluster);
- *partitioned*: each sized virtual cluster is a partition of its own (no lending, no
  borrowing, no idle sharing), as Philly ran and as published replays model it. Jobs of the
  four virtual clusters the trace gives no size, and jobs larger than their cluster, are
  left out (counted).

No cost model (Philly records no topology). The baseline of each policy is first come: the
ratio column is its mean wait over shortest-first's (above 1: shortest-first waits less).
Each replay runs in this process, one after another; its CPU time is reported.

A benchmark, not a timed test: it prints what it measures whatever it is.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.cycle import REPO
from benchmarks.rendering import cells_table
from topoq.discovery.policy import policy_from_document
from topoq.domain.governance import ClusterPolicy, QueueOrder
from topoq.sim.compare import PolicyFigures, Spread, policy_figures
from topoq.sim.engine import Simulation
from topoq.sim.traces import (
    GPUS_PER_NODE,
    INSTANCE_TYPE,
    Trace,
    cluster_of,
    derived_nodes,
    derived_policy,
    read_trace,
    trace_scenario,
)

PHILLY = REPO.parent / "shared" / "traces" / "philly_2017" / "philly_jobs_sia.csv.gz"
POLICIES = ("shared", "partitioned")


@dataclass(frozen=True)
class Replayed:
    policy: str
    order: QueueOrder
    figures: PolicyFigures
    cpu_s: float
    left_out: int


def scaled(trace: Trace, scale: float) -> Trace:
    """The trace with each team's size times ``scale`` (rounded, at least one node)."""
    sizes = {
        team: max(1, round(nodes * scale)) if nodes > 0 else 0
        for team, nodes in trace.guarantees.items()
    }
    return replace(trace, guarantees=sizes)


def partitioned(trace: Trace) -> tuple[Trace, ClusterPolicy, int]:
    """The trace without the jobs no partition can run, each sized team's partition, and how
    many jobs were left out."""
    sizes = {team: nodes for team, nodes in trace.guarantees.items() if nodes > 0}
    kept = tuple(
        job
        for job in trace.jobs
        if job.team in sizes and math.ceil(job.gpus / GPUS_PER_NODE) <= sizes[job.team]
    )
    teams = [
        {
            "name": team,
            "sharing": "DontLend",
            "quotas": [{"flavor": INSTANCE_TYPE, "instances": nodes}],
        }
        for team, nodes in sorted(sizes.items())
    ]
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Policy",
        "metadata": {"name": "philly-partitioned"},
        "scheduling": {"idleResourceSharing": False},
        "teams": teams,
    }
    rules = policy_from_document(document, source="the partitioned policy")
    return replace(trace, jobs=kept, guarantees=sizes), rules, len(trace.jobs) - len(kept)


def replay(
    trace: Trace, policy: str, order: QueueOrder, factor: float, scale: float = 1.0
) -> Replayed:
    """``scale``: the virtual clusters' sizes (the guarantees, and so the cluster) times it."""
    trace = scaled(trace, scale)
    left_out = 0
    if policy == "partitioned":
        trace, rules, left_out = partitioned(trace)
    nodes = derived_nodes(trace)
    cluster = cluster_of(nodes, "philly", trace.source)
    if policy == "shared":
        rules = derived_policy(trace, len(cluster[0]))
    scenario = trace_scenario(trace, cluster, replace(rules, queue_order=order), factor)
    began = time.process_time()
    result = Simulation(scenario).run()
    spent = time.process_time() - began
    return Replayed(policy, order, policy_figures(order.value, result), spent, left_out)


def table(rows: Sequence[Replayed], *, markdown: bool = False) -> str:
    """Per policy: each team's jobs and mean wait under either order, then all teams."""
    header = (
        "policy",
        "team",
        "jobs",
        "wait first come h",
        "wait shortest-first h",
        "first come / shortest-first",
        "p99 first come h",
        "p99 shortest-first h",
    )
    cells = []
    for policy in POLICIES:
        runs = {row.order: row for row in rows if row.policy == policy}
        if len(runs) < 2:
            continue
        fifo, sjf = runs[QueueOrder.SUBMISSION].figures, runs[QueueOrder.SHORTEST_FIRST].figures
        by_team = {team.team: team for team in sjf.teams}
        for team in fifo.teams:
            if team.jobs:
                cells.append(_row(policy, team.team, team.jobs, team.wait, by_team[team.team].wait))
        cells.append(_row(policy, "all", fifo.jobs, fifo.wait, sjf.wait))
    title = "Mean wait per team: first come against shortest-first"
    return cells_table(title, header, cells, left=("policy", "team"), markdown=markdown)


def _row(policy: str, name: str, jobs: int, fifo: Spread, sjf: Spread) -> tuple[str, ...]:
    return (
        policy,
        name,
        f"{jobs:,}",
        _hours(fifo.mean),
        _hours(sjf.mean),
        _ratio(fifo.mean, sjf.mean),
        _hours(fifo.p99),
        _hours(sjf.p99),
    )


def runs_table(rows: Sequence[Replayed]) -> str:
    """Each replay's utilisation, completion, left-out jobs and CPU time."""
    lines = ["policy       order           jobs   left out  GPU util.  JCT mean h  CPU s"]
    for row in rows:
        figures = row.figures
        lines.append(
            f"{row.policy:<12} {row.order.value:<14} {figures.jobs:>6,} {row.left_out:>9,}"
            f" {figures.utilisation:>9.0%} {_hours(figures.completion.mean):>11}"
            f" {row.cpu_s:>6.1f}"
        )
    return "\n".join(lines)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _ratio(baseline: float | None, value: float | None) -> str:
    if baseline is None or value is None:
        return "-"
    if value == 0:
        return "-" if baseline == 0 else "inf"
    return f"{baseline / value:.1f}x"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=PHILLY, help="a Philly trace file")
    parser.add_argument("--limit", type=int, help="its first N jobs (default: all)")
    parser.add_argument("--time-limit-factor", type=float, default=1.5)
    parser.add_argument("--policy", action="append", choices=POLICIES, help="default: both")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="the virtual clusters' sizes times this (default 1: as published); below 1 "
        "loads the cluster more",
    )
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    trace = read_trace(options.trace, limit=options.limit)
    rows = [
        replay(trace, policy, order, options.time_limit_factor, options.scale)
        for policy in options.policy or POLICIES
        for order in QueueOrder
    ]
    jobs = f"first {options.limit:,} jobs" if options.limit else f"all {len(trace.jobs):,} jobs"
    print(
        f"trace {options.trace.name}, {jobs}, time limits {options.time_limit_factor:g}x, "
        f"virtual clusters {options.scale:g}x their sizes"
    )
    print(runs_table(rows))
    print(table(rows, markdown=options.markdown))


if __name__ == "__main__":
    main()
