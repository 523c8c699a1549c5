"""The REST API under load: submissions per second and latency with 50 concurrent clients,
a read route and the trivial ``/healthz`` (the baseline) on the same server in the same run,
and the server's memory with 100,000 stored jobs — on SQLite and on PostgreSQL.

    python -m benchmarks.api [--quick] [--backend sqlite|postgresql|both] [--requests N]

Every server is a real ``python -m topoq.bootstrap`` process on localhost (local executor,
8 nodes × 8 GPUs, two teams); the load generator (``benchmarks.load``) runs in this process.
PostgreSQL is a throwaway server (``topoq.testing.postgres``, fsync on like SQLite's
``synchronous=FULL``). This is a benchmark, not a timed test: it prints numbers and never fails
on them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.api_server import TEAMS, RunningServer, running_server, store_jobs
from benchmarks.load import LoadResult, Request, run_load
from topoq.testing.postgres import given_server, server_binaries, start_throwaway
from topoq.testing.server import whole_node_submission

BACKENDS = ("sqlite", "postgresql")
TARGET_PER_S, TARGET_P99_MS = 500.0, 50.0
WIDE = 160
WARM_UP_PER_CLIENT = 4


@dataclass(frozen=True)
class Scale:
    requests: int = 2_000
    clients: int = 50
    rates_per_s: tuple[float, ...] = (TARGET_PER_S / 2, TARGET_PER_S)
    """Offered loads of the paced submission runs (each on a fresh server)."""
    stored_jobs: int = 100_000
    stored_pending: int = 1_000
    """Of the stored jobs, how many wait (the controller's cycle reads them); the rest ended."""


QUICK = Scale(requests=300, clients=50, stored_jobs=10_000, stored_pending=100)


@dataclass(frozen=True)
class Row:
    backend: str
    route: str
    mode: str
    load: LoadResult
    server_cpu_s: float
    baseline_per_s: float

    @property
    def ratio(self) -> float:
        return self.load.per_s / self.baseline_per_s if self.baseline_per_s else 0.0


@dataclass(frozen=True)
class MemoryRow:
    backend: str
    stored_jobs: int
    pending: int
    started_mib: float
    after_mib: float
    peak_mib: float
    baseline_mib: float

    @property
    def ratio(self) -> float:
        return self.after_mib / self.baseline_mib if self.baseline_mib else 0.0


@dataclass
class Report:
    rows: list[Row]
    memory: list[MemoryRow]


def run(
    backends: Sequence[str], scale: Scale, on_row: Callable[[str], None] = lambda _: None
) -> Report:
    report = Report([], [])
    for backend in backends:
        with databases(backend) as new_database:
            measure_backend(backend, new_database, scale, report, on_row)
    return report


def measure_backend(
    backend: str,
    new_database: Callable[[], str | None],
    scale: Scale,
    report: Report,
    on_row: Callable[[str], None],
) -> None:
    with tempfile.TemporaryDirectory(prefix="topoq-bench-") as root:
        with running_server(Path(root) / "saturated", new_database()) as server:
            warm_up(server, scale)
            baseline_mib = _settled_rss(server)
            rows = measure_routes(backend, server, scale)
        for rate in scale.rates_per_s:
            with running_server(Path(root) / f"paced-{rate:.0f}", new_database()) as server:
                warm_up(server, scale)
                bodies = [_submission(f"paced-{n}", n) for n in range(scale.requests)]
                paced = _measure(server, bodies, scale, rate)
                rows.append(_row(backend, "POST /jobs", f"paced {rate:,.0f}/s", *paced))
        for row in rows:
            report.rows.append(_with_baseline(row, rows[0].load.per_s))
            on_row(f"  {backend:<10} {row.route:<18} {row.mode:<14} {row.load.per_s:8,.0f}/s")
        data_dir, url = Path(root) / "stored", new_database()
        store_jobs(data_dir, url, scale.stored_jobs, scale.stored_pending)
        with running_server(data_dir, url) as server:
            started = server.rss_mib()
            after = _settled_rss(server)
            memory = MemoryRow(
                backend, scale.stored_jobs, scale.stored_pending, started, after,
                server.peak_rss_mib(), baseline_mib,
            )  # fmt: skip
        report.memory.append(memory)
        on_row(f"  {backend:<10} {scale.stored_jobs:,} stored jobs: {after:,.0f} MiB")


def warm_up(server: RunningServer, scale: Scale) -> None:
    """Before a server's measured rows, as before any benchmark: every client sends a few
    authenticated reads (threads, connections and the token's check are then warm); nothing
    is submitted, so the queue the rows build starts empty."""
    reads = [Request("GET", "/api/v1/jobs?limit=1")] * (WARM_UP_PER_CLIENT * scale.clients)
    run_load("127.0.0.1", server.port, server.token, reads, clients=scale.clients)


def measure_routes(backend: str, server: RunningServer, scale: Scale) -> list[Row]:
    """/healthz (the baseline), then submissions, then reads of the submitted jobs."""
    count, ids = scale.requests, [f"job-{number}" for number in range(scale.requests)]
    health = _measure(server, [Request("GET", "/healthz")] * count, scale)
    submitted = _measure(server, [_submission(job, n) for n, job in enumerate(ids)], scale)
    reads = [Request("GET", f"/api/v1/jobs/{ids[(n * 7919) % count]}") for n in range(count)]
    read = _measure(server, reads, scale)
    listed = _measure(server, [Request("GET", "/api/v1/jobs?limit=20")] * count, scale)
    return [
        _row(backend, "GET /healthz", "baseline", *health),
        _row(backend, "POST /jobs", "saturated", *submitted),
        _row(backend, "GET /jobs/{id}", "saturated", *read),
        _row(backend, "GET /jobs?limit=20", "saturated", *listed),
    ]


def _measure(
    server: RunningServer, requests: list[Request], scale: Scale, rate: float | None = None
) -> tuple[LoadResult, float]:
    cpu_before = server.cpu_s()
    result = run_load(
        "127.0.0.1", server.port, server.token, requests, clients=scale.clients, rate_per_s=rate
    )
    return result, server.cpu_s() - cpu_before


def _row(backend: str, route: str, mode: str, load: LoadResult, cpu_s: float) -> Row:
    return Row(backend, route, mode, load, cpu_s, 0.0)


def _with_baseline(row: Row, baseline_per_s: float) -> Row:
    return Row(row.backend, row.route, row.mode, row.load, row.server_cpu_s, baseline_per_s)


def _submission(job_id: str, number: int) -> Request:
    body = whole_node_submission(job_id, TEAMS[number % len(TEAMS)])
    return Request("POST", "/api/v1/jobs", json.dumps(body).encode())


def _settled_rss(server: RunningServer) -> float:
    """RSS after a list call and a controller cycle."""
    server.get("/api/v1/jobs?limit=100")
    server.wait_for_cycle()
    return server.rss_mib()


@contextmanager
def databases(backend: str) -> Iterator[Callable[[], str | None]]:
    """A maker of fresh databases: None (SQLite in the data directory) or PostgreSQL URLs."""
    if backend == "sqlite":
        yield lambda: None
        return
    server = given_server()
    if server is None:
        binaries = server_binaries()
        if binaries is None:
            raise SystemExit("no PostgreSQL: install the postgresql package or set the URL")
        server = start_throwaway(binaries, fsync=True)
    try:
        yield server.create_database
    finally:
        server.stop()


# --- printing ----------------------------------------------------------------------------
def routes_table(report: Report, *, markdown: bool = False) -> Table:
    table = Table(
        title=None if markdown else "API under load (ratio: requests/s vs /healthz, same server)",
        box=box.MARKDOWN if markdown else box.SIMPLE_HEAD,
    )
    for name in ("backend", "route", "mode"):
        table.add_column(name)
    for name in ("requests", "clients", "ok", "req/s", "p50 ms", "p99 ms"):
        table.add_column(name, justify="right")
    for name in ("server CPU ms/req", "client CPU ms/req", "ratio"):
        table.add_column(name, justify="right")
    for row in report.rows:
        load = row.load
        table.add_row(
            row.backend, row.route, row.mode, f"{load.requests:,}", str(load.clients),
            "all" if load.all_succeeded else f"{load.succeeded:,} ({_failures(load)})",
            f"{load.per_s:,.0f}", f"{load.p50_ms():,.1f}", f"{load.p99_ms():,.1f}",
            f"{row.server_cpu_s * 1e3 / load.requests:,.2f}",
            f"{load.client_cpu_s * 1e3 / load.requests:,.2f}", f"{row.ratio:,.2f}×",
        )  # fmt: skip
    return table


def memory_table(report: Report, *, markdown: bool = False) -> Table:
    table = Table(
        title=None if markdown else "server memory (ratio: vs an empty store, same run)",
        box=box.MARKDOWN if markdown else box.SIMPLE_HEAD,
    )
    table.add_column("backend")
    for name in ("stored jobs", "of them pending", "RSS at start MiB"):
        table.add_column(name, justify="right")
    for name in ("RSS after list + cycle MiB", "peak MiB", "empty store MiB", "ratio"):
        table.add_column(name, justify="right")
    for row in report.memory:
        table.add_row(
            row.backend, f"{row.stored_jobs:,}", f"{row.pending:,}", f"{row.started_mib:,.0f}",
            f"{row.after_mib:,.0f}", f"{row.peak_mib:,.0f}", f"{row.baseline_mib:,.0f}",
            f"{row.ratio:,.2f}×",
        )  # fmt: skip
    return table


def _failures(load: LoadResult) -> str:
    failed = {status: n for status, n in load.statuses.items() if not 200 <= status < 300}
    parts = [f"{n} × {status}" for status, n in sorted(failed.items())]
    if load.transport_errors:
        parts.append(f"{load.transport_errors} connection errors")
    return ", ".join(parts)


def target_line(report: Report) -> str:
    """Whether SQLite takes >= 500 submissions/s, with p99 < 50 ms at 500/s offered."""
    rows = {(row.route, row.mode): row for row in report.rows if row.backend == "sqlite"}
    saturated = rows.get(("POST /jobs", "saturated"))
    paced = rows.get(("POST /jobs", f"paced {TARGET_PER_S:,.0f}/s"))
    if saturated is None or paced is None:
        return "targets: not measured (needs --backend sqlite or both)"
    fast = saturated.load.per_s >= TARGET_PER_S
    quick = paced.load.p99_ms() < TARGET_P99_MS
    return (
        f"SQLite: {saturated.load.per_s:,.0f} submissions/s saturated (target >= "
        f"{TARGET_PER_S:,.0f}: {'holds' if fast else 'does NOT hold'}); p99 "
        f"{paced.load.p99_ms():,.1f} ms at {TARGET_PER_S:,.0f}/s offered (target < "
        f"{TARGET_P99_MS:,.0f} ms: {'holds' if quick else 'does NOT hold'})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.api", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="300 requests, 10,000 stored jobs")
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--requests", type=int, default=None, help="requests per row")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (50)")
    parser.add_argument(
        "--rates", type=_rates, default=None, help="paced submissions per second, e.g. 250,500"
    )
    parser.add_argument("--stored-jobs", type=int, default=None, help="jobs for the memory row")
    parser.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    return parser.parse_args(argv)


def scale_of(args: argparse.Namespace) -> Scale:
    base = QUICK if args.quick else Scale()
    stored = args.stored_jobs if args.stored_jobs is not None else base.stored_jobs
    return Scale(
        requests=args.requests or base.requests,
        clients=args.clients or base.clients,
        rates_per_s=args.rates or base.rates_per_s,
        stored_jobs=stored,
        stored_pending=min(base.stored_pending, stored),
    )


def _rates(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(argv)
    scale = scale_of(args)
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    console = Console()
    if not console.is_terminal:
        console = Console(width=WIDE)  # a pipe or file: never wrap or truncate the table
    console.print(
        f"API benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {', '.join(backends)}; "
        f"{scale.requests:,} requests per row, {scale.clients} clients, paced at "
        f"{' and '.join(f'{rate:,.0f}/s' for rate in scale.rates_per_s)}; "
        f"{scale.stored_jobs:,} stored jobs"
    )
    report = run(backends, scale, on_row=lambda line: console.print(line, style="dim"))
    console.print(routes_table(report, markdown=args.markdown))
    console.print(memory_table(report, markdown=args.markdown))
    console.print(target_line(report))
    return report


if __name__ == "__main__":
    main()
