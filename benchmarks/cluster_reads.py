"""Cluster reads under a long queue: ``GET /teams``, ``GET /nodes`` and ``GET /topology`` with
7,000 and 20,000 pending jobs, against ``GET /healthz`` and ``GET /jobs/{id}`` (the baselines)
on the same server in the same run — on SQLite and on PostgreSQL.

    python -m benchmarks.cluster_reads [--quick] [--backend sqlite|postgresql|both]

Each queue length gets a fresh real server (``python -m topoq.bootstrap``, local executor,
8 nodes × 8 GPUs, two teams) on a store filled before it starts (``store_jobs``: whole-node
jobs; the controller admits 8, the rest wait). Requests are paced (request *i* due at *i* / rate,
latency counted from when it was due), so the figures are what a client sees at that load, not
the server's capacity. This is a benchmark, not a timed test: it prints numbers and never fails
on them.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.api import BACKENDS, WIDE, databases
from benchmarks.api_server import RunningServer, cpu_s, running_server, store_jobs
from benchmarks.load import LoadResult, Request, run_load
from topoq.testing.server import api_process_ids

TARGET_P99_MS = 50.0
TARGET_ROUTES = ("GET /teams", "GET /nodes")
ROUTES = {
    "GET /healthz": "/healthz",
    "GET /jobs/{id}": "/api/v1/jobs/stored-000000",
    "GET /teams": "/api/v1/teams",
    "GET /nodes": "/api/v1/nodes",
    "GET /topology": "/api/v1/topology",
}
BASELINE = "GET /healthz"


@dataclass(frozen=True)
class Scale:
    pending: tuple[int, ...] = (7_000, 20_000)
    requests: int = 500
    clients: int = 8
    rate_per_s: float = 50.0


QUICK = Scale(pending=(2_000,), requests=100)


@dataclass(frozen=True)
class Row:
    backend: str
    pending: int
    route: str
    load: LoadResult
    api_cpu_s: float
    """CPU time of the API process over the row (the controller's steps not counted)."""
    baseline_p99_ms: float

    @property
    def ratio(self) -> float:
        """p99 over the baseline's p99 (same server, same run)."""
        return self.load.p99_ms() / self.baseline_p99_ms if self.baseline_p99_ms else 0.0


def run(
    backends: Sequence[str], scale: Scale, on_row: Callable[[str], None] = lambda _: None
) -> list[Row]:
    rows: list[Row] = []
    for backend in backends:
        with databases(backend) as new_database, tempfile.TemporaryDirectory() as root:
            for pending in scale.pending:
                data_dir, url = Path(root) / f"pending-{pending}", new_database()
                store_jobs(data_dir, url, pending, pending)
                with running_server(data_dir, url) as server:
                    server.wait_for_cycle(timeout_s=600)  # the queue is settled
                    rows += measure(backend, pending, server, scale, on_row)
    return rows


def measure(
    backend: str,
    pending: int,
    server: RunningServer,
    scale: Scale,
    on_row: Callable[[str], None],
) -> list[Row]:
    """Every route once as warm-up, then each route's paced row; the baseline first."""
    for path in ROUTES.values():
        if path.startswith("/api/"):
            server.get(path)
    api = api_process_ids(server.process.pid)
    measured: dict[str, tuple[LoadResult, float]] = {}
    for route, path in ROUTES.items():
        requests = [Request("GET", path)] * scale.requests
        cpu_before = sum(cpu_s(pid) for pid in api)
        load = run_load(
            "127.0.0.1",
            server.port,
            server.token,
            requests,
            clients=scale.clients,
            rate_per_s=scale.rate_per_s,
        )
        measured[route] = (load, sum(cpu_s(pid) for pid in api) - cpu_before)
        p99 = load.p99_ms()
        on_row(f"  {backend:<10} {pending:>7,} pending  {route:<16} p99 {p99:8.1f} ms")
    baseline = measured[BASELINE][0].p99_ms()
    return [
        Row(backend, pending, route, load, cpu, baseline) for route, (load, cpu) in measured.items()
    ]


def table(rows: Sequence[Row], *, markdown: bool = False) -> Table:
    shown = Table(
        title=None if markdown else "cluster reads (ratio: p99 vs GET /healthz, same server)",
        box=box.MARKDOWN if markdown else box.SIMPLE_HEAD,
    )
    shown.add_column("backend")
    shown.add_column("pending", justify="right")
    shown.add_column("route")
    for name in ("requests", "ok", "p50 ms", "p99 ms", "API CPU ms/req", "ratio"):
        shown.add_column(name, justify="right")
    for row in rows:
        load = row.load
        shown.add_row(
            row.backend, f"{row.pending:,}", row.route, f"{load.requests:,}",
            "all" if load.all_succeeded else f"{load.succeeded:,}",
            f"{load.p50_ms():,.1f}", f"{load.p99_ms():,.1f}",
            f"{row.api_cpu_s * 1e3 / load.requests:,.2f}", f"{row.ratio:,.1f}×",
        )  # fmt: skip
    return shown


def target_line(rows: Sequence[Row]) -> str:
    """Whether /teams and /nodes answer under 50 ms p99 at the longest queue measured."""
    longest = max((row.pending for row in rows), default=0)
    judged = [row for row in rows if row.pending == longest and row.route in TARGET_ROUTES]
    if not judged:
        return "target: not measured"
    worst = max(judged, key=lambda row: row.load.p99_ms())
    holds = worst.load.p99_ms() < TARGET_P99_MS
    return (
        f"{' and '.join(TARGET_ROUTES)} at {longest:,} pending: worst p99 "
        f"{worst.load.p99_ms():,.1f} ms ({worst.backend} {worst.route}; target < "
        f"{TARGET_P99_MS:,.0f} ms: {'holds' if holds else 'does NOT hold'})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_reads", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000 pending, 100 requests")
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--pending", type=_counts, default=None, help="e.g. 7000,20000")
    parser.add_argument("--requests", type=int, default=None, help="requests per row (500)")
    parser.add_argument("--rate", type=float, default=None, help="requests per second (50)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    return parser.parse_args(argv)


def _counts(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> list[Row]:
    args = parse_args(argv)
    base = QUICK if args.quick else Scale()
    scale = Scale(
        pending=args.pending or base.pending,
        requests=args.requests or base.requests,
        clients=base.clients,
        rate_per_s=args.rate or base.rate_per_s,
    )
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    console = Console() if Console().is_terminal else Console(width=WIDE)
    console.print(
        f"cluster reads, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {', '.join(backends)}; "
        f"{' and '.join(f'{n:,}' for n in scale.pending)} pending; {scale.requests:,} requests "
        f"per row paced at {scale.rate_per_s:,.0f}/s over {scale.clients} clients"
    )
    rows = run(backends, scale, on_row=lambda line: console.print(line, style="dim"))
    console.print(table(rows, markdown=args.markdown))
    console.print(target_line(rows))
    return rows


if __name__ == "__main__":
    main()
