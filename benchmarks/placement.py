"""Gang placement at scale: topoq's ``find_placement`` against a node-scanning baseline.

Both run in the same process on the same inputs (see :mod:`benchmarks.scenarios`). The topology
tree and ledger are built once per cluster and not timed; each placement is timed alone with
``time.perf_counter_ns`` after a warm-up, so memos (eligibility, child matrices) are warm.

    python -m benchmarks.placement [--quick] [--sizes 512,2048,8192] [--repeat N] [--seed S]

This is a benchmark, not a timed test: it prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.baseline_placement import NodeTake, ScanningPlacer
from benchmarks.scenarios import DEFAULT_SIZES, Cluster, Gang, gangs, make_cluster
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.placement import PlacementResult

DEFAULT_REPEAT = 1000
DEFAULT_SEED = 20261130
QUICK_REPEAT = 20
TARGET_NODES, TARGET_GPUS, TARGET_US = 8192, 512, 1000.0
WIDE = 160


@dataclass(frozen=True)
class Decision:
    """Admitted or not, and the domains used at each level (label-value paths)."""

    admitted: bool
    domains: tuple[frozenset[tuple[str, ...]], ...]

    def agrees_with(self, other: Decision) -> bool:
        """Same verdict; when admitted, the same domains at every network level and the same
        number of nodes."""
        if self.admitted != other.admitted:
            return False
        same_network = self.domains[:-1] == other.domains[:-1]
        return same_network and len(self.domains[-1]) == len(other.domains[-1])

    @property
    def spans(self) -> str:
        return "/".join(str(len(level)) for level in self.domains) if self.admitted else "-"


@dataclass(frozen=True)
class Row:
    nodes: int
    gang_gpus: int
    pods: int
    gpus_per_pod: int
    mode: str
    level: str
    admitted: bool
    spans: str
    topoq_p50_us: float
    topoq_p99_us: float
    topoq_faults: float
    baseline_p50_us: float
    agree: bool

    @property
    def ratio(self) -> float:
        return self.baseline_p50_us / self.topoq_p50_us


@dataclass(frozen=True)
class ClusterStats:
    nodes: int
    domains: tuple[int, ...]
    used_gpu_fraction: float
    tree_build_ms: float
    ledger_build_ms: float
    peak_mib: float


@dataclass(frozen=True)
class Report:
    rows: list[Row]
    clusters: list[ClusterStats]
    repeat: int
    baseline_repeat: int
    seed: int


def run(
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeat: int = DEFAULT_REPEAT,
    seed: int = DEFAULT_SEED,
    baseline_repeat: int | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> Report:
    """Measure every (cluster size, gang, mode); ``on_row`` sees each row as it is measured."""
    baseline_repeat = baseline_repeat or max(3, repeat // 10)
    rows: list[Row] = []
    clusters: list[ClusterStats] = []
    for size in sizes:
        stats, measured = measure_cluster(make_cluster(size, seed), repeat, baseline_repeat, on_row)
        clusters.append(stats)
        rows.extend(measured)
    return Report(rows, clusters, repeat, baseline_repeat, seed)


def measure_cluster(
    cluster: Cluster, repeat: int, baseline_repeat: int, on_row: Callable[[Row], None] | None
) -> tuple[ClusterStats, list[Row]]:
    started = time.perf_counter_ns()
    tree = build_tree(cluster.nodes, cluster.spec)
    built = time.perf_counter_ns()
    ledger = CapacityLedger.with_usage(tree, cluster.used, strict=True)
    ledgered = time.perf_counter_ns()
    placer = ScanningPlacer(cluster.nodes, cluster.spec, cluster.used)
    rows = []
    for gang in gangs(cluster):
        row = measure_gang(cluster, ledger, placer, gang, repeat, baseline_repeat)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    stats = ClusterStats(
        nodes=len(tree.nodes),
        domains=tuple(level.size for level in tree.levels),
        used_gpu_fraction=cluster.used_gpu_fraction,
        tree_build_ms=(built - started) / 1e6,
        ledger_build_ms=(ledgered - built) / 1e6,
        peak_mib=peak_mib(cluster),
    )
    return stats, rows


def measure_gang(
    cluster: Cluster,
    ledger: CapacityLedger,
    placer: ScanningPlacer,
    gang: Gang,
    repeat: int,
    baseline_repeat: int,
) -> Row:
    pod_set = gang.workload.pod_sets[0]
    topoq = topoq_decision(ledger.tree, find_placement(ledger, gang.workload))
    baseline = baseline_decision(placer, placer.place(pod_set))
    topoq_time = timed(lambda: find_placement(ledger, gang.workload), repeat)
    baseline_time = timed(lambda: placer.place(pod_set), baseline_repeat)
    return Row(
        nodes=len(cluster.nodes),
        gang_gpus=gang.gpus,
        pods=gang.pods,
        gpus_per_pod=gang.gpus_per_pod,
        mode=gang.mode,
        level=gang.level_name,
        admitted=topoq.admitted,
        spans=topoq.spans,
        topoq_p50_us=topoq_time.p50_us(),
        topoq_p99_us=topoq_time.p99_us(),
        topoq_faults=topoq_time.faults_per_call,
        baseline_p50_us=baseline_time.p50_us(),
        agree=topoq.agrees_with(baseline),
    )


@dataclass(frozen=True)
class Timing:
    samples_ns: list[int]
    faults_per_call: float
    """Minor page faults per call: fresh memory the allocator had to map (see the README)."""

    def p50_us(self) -> float:
        return percentile(self.samples_ns, 50) / 1e3

    def p99_us(self) -> float:
        return percentile(self.samples_ns, 99) / 1e3


def timed(call: Callable[[], object], repeat: int) -> Timing:
    """Wall time of each of ``repeat`` calls, after a warm-up of a tenth as many (at least 2)."""
    for _ in range(max(2, repeat // 10)):
        call()
    gc.collect()
    samples: list[int] = []
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeat):
        started = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - started)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    return Timing(samples, faults / repeat)


def percentile(samples: Sequence[int], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least ``q``% of samples at or below."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 100))
    return float(ordered[int(rank) - 1])


def topoq_decision(tree: TopologyTree, result: PlacementResult) -> Decision:
    levels = tree.spec.levels
    paths = [
        tuple(assignment.domain[label] for label in levels)
        for outcome in result.pod_sets
        for assignment in outcome.assignments
    ]
    return _decision(result.admitted, paths, len(levels))


def baseline_decision(placer: ScanningPlacer, takes: list[NodeTake] | None) -> Decision:
    paths = [placer.paths[node] for node, _ in takes or ()]
    return _decision(takes is not None, paths, len(placer.labels))


def _decision(admitted: bool, paths: list[tuple[str, ...]], depth: int) -> Decision:
    domains = tuple(frozenset(path[: level + 1] for path in paths) for level in range(depth))
    return Decision(admitted, domains)


def peak_mib(cluster: Cluster) -> float:
    """Peak traced memory while building the tree and ledger and placing each gang once."""
    gc.collect()
    tracemalloc.start()
    try:
        tree = build_tree(cluster.nodes, cluster.spec)
        ledger = CapacityLedger.with_usage(tree, cluster.used, strict=True)
        for gang in gangs(cluster):
            find_placement(ledger, gang.workload)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def results_table(report: Report, *, markdown: bool = False) -> Table:
    table = Table(
        title=None if markdown else "find_placement vs node-scanning baseline",
        box=box.MARKDOWN if markdown else box.SIMPLE_HEAD,
    )
    for name in ("nodes", "gang GPUs", "mode", "admitted", "domains used"):
        table.add_column(name, justify="right" if name in ("nodes", "gang GPUs") else "left")
    for name in ("topoq p50 µs", "topoq p99 µs", "faults/call", "baseline p50 µs", "ratio"):
        table.add_column(name, justify="right")
    table.add_column("agree")
    for row in report.rows:
        table.add_row(
            f"{row.nodes:,}",
            f"{row.gang_gpus:,} ({row.pods}×{row.gpus_per_pod})",
            f"{row.mode} {row.level}",
            "yes" if row.admitted else "no",
            row.spans,
            f"{row.topoq_p50_us:,.0f}",
            f"{row.topoq_p99_us:,.0f}",
            f"{row.topoq_faults:,.0f}",
            f"{row.baseline_p50_us:,.0f}",
            f"{row.ratio:,.1f}×",
            "yes" if row.agree else "NO",
        )
    return table


def clusters_table(report: Report, *, markdown: bool = False) -> Table:
    table = Table(
        title=None if markdown else "clusters", box=box.MARKDOWN if markdown else box.SIMPLE_HEAD
    )
    for name in ("nodes", "domains per level", "GPUs used", "tree build ms", "ledger ms"):
        table.add_column(name, justify="right")
    table.add_column("peak MiB", justify="right")
    for stats in report.clusters:
        table.add_row(
            f"{stats.nodes:,}",
            " / ".join(f"{count:,}" for count in stats.domains),
            f"{stats.used_gpu_fraction:.1%}",
            f"{stats.tree_build_ms:,.1f}",
            f"{stats.ledger_build_ms:,.1f}",
            f"{stats.peak_mib:,.1f}",
        )
    return table


def target_line(report: Report) -> str:
    """Whether the 512-GPU gang on 8,192 nodes places in under 1 ms (p50, slowest mode)."""
    rows = [
        row for row in report.rows if row.nodes == TARGET_NODES and row.gang_gpus == TARGET_GPUS
    ]
    head = f"{TARGET_GPUS}-GPU gang on {TARGET_NODES:,} nodes"
    if not rows:
        return f"{head}: not measured (add {TARGET_NODES} to --sizes)"
    worst = max(rows, key=lambda row: row.topoq_p50_us)
    modes = ", ".join(f"{row.mode} {row.topoq_p50_us:,.0f} µs" for row in rows)
    verdict = "holds" if worst.topoq_p50_us < TARGET_US else "does NOT hold"
    return (
        f"{head}: p50 {worst.topoq_p50_us:,.0f} µs (target < {TARGET_US:,.0f} µs) — "
        f"target {verdict} ({modes})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.placement", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="512 nodes, few repetitions")
    parser.add_argument("--sizes", type=_sizes, default=None, help="e.g. 512,2048,8192")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per topoq row")
    parser.add_argument(
        "--baseline-repeat",
        type=int,
        default=None,
        help="timed calls per baseline row (default: repeat/10, at least 3)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="usage generator seed")
    parser.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    return parser.parse_args(argv)


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = args.sizes or ([512] if args.quick else list(DEFAULT_SIZES))
    repeat = args.repeat or (QUICK_REPEAT if args.quick else DEFAULT_REPEAT)
    console = Console()
    if not console.is_terminal:
        console = Console(width=WIDE)  # a pipe or file: never wrap or truncate the table
    console.print(
        f"placement benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: sizes {sizes}, "
        f"repeat {repeat}, seed {args.seed}"
    )
    report = run(
        sizes,
        repeat,
        args.seed,
        args.baseline_repeat,
        on_row=lambda row: console.print(_progress(row), style="dim"),
    )
    console.print(results_table(report, markdown=args.markdown))
    console.print(clusters_table(report, markdown=args.markdown))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    console.print(f"baseline repeat {report.baseline_repeat}; process max RSS {rss_mib:,.0f} MiB")
    console.print(target_line(report))


def _progress(row: Row) -> str:
    return (
        f"  {row.nodes:>5} nodes  {row.gang_gpus:>5} GPUs  {row.mode:<9}  "
        f"topoq {row.topoq_p50_us:>8,.0f} µs  baseline {row.baseline_p50_us:>9,.0f} µs"
    )


if __name__ == "__main__":
    main()
