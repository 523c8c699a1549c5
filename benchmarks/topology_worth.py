"""What topology-aware placement buys on a real trace (issue 14 §8): the same arrivals under
topoq's placement, a Kueue-like scheduler and a topology-oblivious first fit, with the
communication cost model, on the same cluster.

    python -m benchmarks.topology_worth                      # ITP 2021, first 10,000 jobs
    python -m benchmarks.topology_worth --limit 3000 --markdown
    python -m benchmarks.topology_worth --trace FILE --shape 4x2x16 --shape 1x8x16

**Trace**: by default the ten clusters of Microsoft ITP 2021 (``../shared/traces/
microsoft_itp_2021/raw/cluster*.csv``) merged into one stream by arrival, as issue 14's speed
target replays it, cut to its first ``--limit`` jobs; or any trace ``topoq simulate`` reads.
**Clusters**: 1,024 GPUs (128 p5.48xlarge nodes) in each ``--shape`` (spines x blocks x
nodes): ``1x8x16`` is the derived cluster's shape (one spine: only latency separates a spread
gang from a tight one under the default model), ``4x2x16`` puts the same nodes under four
spines joined by the 8:1 core. **Policy**: derived (the one team guaranteed the cluster).
**Time limits**: none, as in the trace, or ``--time-limit-factor F`` times each job's
duration (what lets jobs backfill).
**Cost model**: the defaults (docs/simulate.md). Each mode's replay runs in this process, one
after another; the CPU time of each is reported. The baseline is first fit: the ratio column
is first fit's mean completion time over the mode's (above 1: faster than first fit).

A benchmark, not a timed test: it prints what it measures whatever it is.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cycle import REPO
from benchmarks.rendering import cells_table
from topoq.core.cycle import PlacementMode
from topoq.discovery.clusterfile import cluster_from_document
from topoq.sim.compare import PolicyFigures, policy_figures
from topoq.sim.engine import Simulation
from topoq.sim.network import NetworkModel
from topoq.sim.traces import INSTANCE_TYPE, derived_policy, read_trace, trace_scenario

ITP_RAW = REPO.parent / "shared" / "traces" / "microsoft_itp_2021" / "raw"
DEFAULT_LIMIT = 10_000
DEFAULT_SHAPES = ("1x8x16", "4x2x16")


@dataclass(frozen=True)
class Replayed:
    shape: str
    mode: PlacementMode
    figures: PolicyFigures
    cpu_s: float


def merged_itp(into: Path) -> Path:
    """The ITP clusters' rows in one file (each raw file lacks a final newline)."""
    files = sorted(ITP_RAW.glob("cluster*.csv"))
    if not files:
        raise SystemExit(f"no ITP trace under {ITP_RAW}: give --trace FILE")
    lines = [files[0].read_text().splitlines()[0]]
    for path in files:
        lines.extend(line for line in path.read_text().splitlines()[1:] if line.strip())
    into.write_text("\n".join(lines) + "\n")
    return into


def replay(
    trace_path: Path,
    limit: int,
    shape: str,
    mode: PlacementMode,
    time_limit_factor: float | None = None,
) -> Replayed:
    trace = read_trace(trace_path, limit=limit)
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": f"worth-{shape}"},
        "generate": f"{shape} {INSTANCE_TYPE}",
    }
    cluster = cluster_from_document(document, source=f"shape {shape}")
    nodes = tuple(cluster.nodes)
    scenario = trace_scenario(trace, (nodes, cluster.topology), derived_policy(trace, len(nodes)))
    began = time.process_time()
    result = Simulation(scenario, NetworkModel(), mode).run()
    spent = time.process_time() - began
    return Replayed(shape, mode, policy_figures(mode.value, result), spent)


def table(rows: Sequence[Replayed], *, markdown: bool = False) -> str:
    header = (
        "cluster",
        "placement",
        "JCT mean h",
        "JCT p50 h",
        "JCT p99 h",
        "wait mean h",
        "slow-down mean",
        "slow-down p99",
        "at best span",
        "GPU util.",
        "preempted",
        "JCT vs first fit",
        "CPU s",
    )
    cells = []
    for row in rows:
        baseline = next(
            one for one in rows if one.shape == row.shape and one.mode is PlacementMode.FIRST_FIT
        )
        figures, first_fit = row.figures, baseline.figures
        cells.append(
            (
                row.shape,
                row.mode.value,
                _hours(figures.completion.mean),
                _hours(figures.completion.p50),
                _hours(figures.completion.p99),
                _hours(figures.wait.mean),
                _number(figures.slowdown.mean),
                _number(figures.slowdown.p99),
                "-" if figures.at_best_span is None else f"{figures.at_best_span:.0%}",
                f"{figures.utilisation:.0%}",
                str(figures.preemptions),
                _ratio(first_fit.completion.mean, figures.completion.mean),
                f"{row.cpu_s:.1f}",
            )
        )
    title = "The same arrivals under each placement"
    return cells_table(title, header, cells, left=("cluster", "placement"), markdown=markdown)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _ratio(baseline: float | None, value: float | None) -> str:
    return "-" if not baseline or not value else f"{baseline / value:.3f}x"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, help="a trace file (default: ITP 2021 merged)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="its first N jobs")
    parser.add_argument(
        "--shape", action="append", help="spines x blocks x nodes (default: 1x8x16, 4x2x16)"
    )
    parser.add_argument(
        "--time-limit-factor",
        type=float,
        help="give each job a time limit of its duration times this (default: none)",
    )
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        path = options.trace or merged_itp(Path(scratch) / "itp-merged.csv")
        rows = [
            replay(path, options.limit, shape, mode, options.time_limit_factor)
            for shape in options.shape or DEFAULT_SHAPES
            for mode in PlacementMode
        ]
    limits = options.time_limit_factor
    print(
        f"trace {options.trace or 'ITP 2021, ten clusters merged'}, first {options.limit:,} jobs"
        + (f", time limits {limits:g}x their durations" if limits else ", no time limits")
    )
    print(table(rows, markdown=options.markdown))


if __name__ == "__main__":
    main()
