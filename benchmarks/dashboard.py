"""The dashboard's first paint on a large cluster, in Debian's chromium (issue 13 §4).

    python -m benchmarks.dashboard                 # 1,024 nodes, 500 running, 2,000 pending
    python -m benchmarks.dashboard --nodes 512 --running 200 --pending 500 --repeat 3

**Workload**: a cluster of ``--nodes`` nodes of 8 GPUs (spine ⊃ block ⊃ rack ⊃ node, 16 nodes
a rack), 8 teams whose guarantees (no borrowing) add up to ``--running`` two-node jobs, and
``--running`` + ``--pending`` such jobs submitted round the teams: the real controller
(``Controller.step`` with a scripted executor that reports each gang started) admits and
starts ``--running`` of them, and the others wait for quota. The store is a SQLite file; the API is
the real app (``topoq.api.app.create_app``) under uvicorn on a free port, as an API process of
``topoq server`` serves it, with an admin token.

**Measured**, ``--repeat`` times in a fresh browser context each (no cache): from the
navigation to ``/`` (signed in: the token is in the tab's session storage) until the topology
map has drawn its summary and every top-level domain (*first paint*); then until a top-level
domain clicked open has drawn its nodes and their GPU cells (*open a spine*); the bytes the
page downloaded for the first paint (its files and the API's answers, as the browser's
resource timing counts them); the bytes per second an idle page downloads afterwards (nothing
changes on the cluster: it asks ``GET /changes`` each second); and the queue view's first
paint. With httpx: ``GET /queue?limit=500`` (the waiting jobs in scheduling order) right after
a write (a waiting job held), when the order is worked out again, and while nothing changed,
when the kept order is served. **Baseline**, in the same run: the same three API answers
(``/topology``, ``/nodes``, ``/teams``) fetched with httpx, one after another — what the data
alone costs; the ratio says what the page adds to it. A benchmark, not a timed test: it prints
numbers and never fails on them (``tests/benchmarks/`` runs it small).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from playwright.sync_api import sync_playwright
from rich import box
from rich.console import Console
from rich.table import Table

from topoq.api.app import create_app
from topoq.api.service import Service
from topoq.domain.job import JobId, JobSpec
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.local.processes import free_port
from topoq.store import SqlStore, open_store
from topoq.store.submissions import Submission, SubmissionWriter
from topoq.store.transactions import Transactions
from topoq.testing.builders import gpu_pods, workload
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.governance import gpu_cluster, policy, team

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEAMS = [f"team-{index}" for index in range(8)]
SHAPES = {256: [2, 2, 4, 16], 512: [2, 4, 4, 16], 1024: [4, 4, 4, 16], 2048: [4, 8, 4, 16]}
"""Nodes → spines, blocks per spine, racks per block, nodes per rack."""
TOKEN_KEY = "topoq.token"
QUEUE_PAGE = 500
"""Jobs the queue view asks for."""
IDLE_S = 5.0
TRANSFERRED = "performance.getEntriesByType('resource').map(e => e.transferSize)"


@dataclass
class Measured:
    first_paint_s: list[float]
    open_spine_s: list[float]
    downloaded_bytes: int
    files: int
    data_only_s: list[float]
    idle_bytes_per_s: float
    queue_paint_s: list[float]
    queue_first_s: float
    queue_kept_s: list[float]
    pending_list_s: list[float]
    nodes_drawn: int
    running: int
    pending: int


def filled_store(data_dir: Path, nodes: int, running: int, pending: int) -> tuple[SqlStore, Any]:
    """Nodes, a policy, and jobs: ``running`` started by the real controller, ``pending``
    waiting behind them."""
    cluster_nodes, topology = gpu_cluster(SHAPES[nodes])
    store = open_store(None, data_dir)
    store.save_nodes(cluster_nodes, actor="bench", now=0.0)
    pods_each = 2
    running = min(running, nodes // pods_each)
    quotas = (  # each team's guarantee holds exactly its share of the running jobs, no more
        team(name, 8 * pods_each * (running // len(TEAMS) + (index < running % len(TEAMS))),
             borrow_gpus=0)
        for index, name in enumerate(TEAMS)
    )  # fmt: skip
    store.save_policy(policy(*quotas), actor="bench", now=0.0)
    writer = SubmissionWriter(Transactions(store.database))
    total = running + pending
    specs = [
        JobSpec(
            JobId(f"job-{number:05d}"),
            TEAMS[number % len(TEAMS)],  # type: ignore[arg-type]
            workload(gpu_pods(pods_each, gpus=8), name=f"job-{number:05d}"),
            float(number),
        )
        for number in range(total)
    ]
    for first in range(0, len(specs), 500):
        writer.commit([Submission(spec, spec.submitted_at) for spec in specs[first : first + 500]])
    executor = ScriptedExecutor()
    clock = [float(total)]
    controller = Controller(store, executor, topology, clock=lambda: clock[0])
    started: set[str] = set()
    while True:
        admitted = len(controller.step().result.admissions)
        for launch in executor.launches:
            if launch.job.id not in started:
                started.add(launch.job.id)
                executor.report(ExecutorEventKind.STARTED, launch.job.id, at=clock[0])
        clock[0] += 1.0
        if not admitted:
            controller.step()  # the starts stored
            return store, topology


@contextlib.contextmanager
def api_serving(store: SqlStore, topology: Any) -> Iterator[str]:
    """The real API app under uvicorn in a thread, on a free port."""
    port = free_port()
    config = uvicorn.Config(  # log_config None: uvicorn leaves the process's logging alone
        create_app(Service(store, topology)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        log_config=None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def measure(nodes: int, running: int, pending: int, repeat: int) -> Measured:
    with tempfile.TemporaryDirectory(prefix="topoq-dashboard-") as directory:
        store, topology = filled_store(Path(directory), nodes, running, pending)
        token = store.create_token("bench", "admin", [])[0]
        counts = store.count_jobs_by_team_and_phase(TEAMS)
        run_count = sum(n for (_, phase), n in counts.items() if phase.value == "running")
        wait_count = sum(n for (_, phase), n in counts.items() if phase.value == "pending")
        with api_serving(store, topology) as url:
            _timed_get(url, token, f"/queue?limit={QUEUE_PAGE}")  # the API's caches warm
            queue_first = _after_a_write(url, token, f"/queue?limit={QUEUE_PAGE}")
            queue_kept = [_timed_get(url, token, f"/queue?limit={QUEUE_PAGE}") for _ in range(5)]
            pending = [
                _timed_get(url, token, f"/jobs?phase=pending&limit={QUEUE_PAGE}") for _ in range(5)
            ]
            data_only = [_data_only(url, token) for _ in range(repeat)]
            measured = _in_browser(url, token, repeat)
        store.close()
    return Measured(
        measured["first"], measured["open"], measured["bytes"], measured["files"], data_only,
        measured["idle"], measured["queue"], queue_first, queue_kept, pending,
        measured["nodes"], run_count, wait_count,
    )  # fmt: skip


def _after_a_write(url: str, token: str, route: str) -> float:
    """``route`` timed right after a write (a waiting job held): the order is worked out."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=60) as client:
        waiting = client.get("/jobs", params={"phase": "pending", "limit": 1}).json()["items"]
        if waiting:
            client.post(f"/jobs/{waiting[0]['id']}/hold").raise_for_status()
    return _timed_get(url, token, route)


def _timed_get(url: str, token: str, route: str) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    began = time.perf_counter()
    httpx.get(f"{url}/api/v1{route}", headers=headers, timeout=60).raise_for_status()
    return time.perf_counter() - began


def _data_only(url: str, token: str) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    began = time.perf_counter()
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=30) as client:
        for route in ("/topology", "/nodes", "/teams"):
            client.get(route).raise_for_status()
    return time.perf_counter() - began


def _in_browser(url: str, token: str, repeat: int) -> dict[str, Any]:
    first, opened, downloaded, files, drawn, queue, idle = [], [], 0, 0, 0, [], 0.0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            for _ in range(repeat):
                context = browser.new_context(viewport={"width": 1600, "height": 1000})
                context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {token!r})")
                page = context.new_page()
                page.set_default_timeout(60_000)
                began = time.perf_counter()
                page.goto(f"{url}/")
                page.wait_for_selector("[data-testid=topology-summary]")
                page.wait_for_selector("[data-testid=map] > .domain")
                first.append(time.perf_counter() - began)
                entries = page.evaluate(
                    "performance.getEntriesByType('navigation').concat("
                    "performance.getEntriesByType('resource')).map(e => e.transferSize)"
                )
                downloaded, files = int(sum(entries)), len(entries)
                began = time.perf_counter()
                page.click("[data-testid=map] > .domain .domain-name")
                page.wait_for_selector("[data-testid=map] [data-node] .gpu")
                opened.append(time.perf_counter() - began)
                drawn = page.locator("[data-node]").count()
                page.wait_for_timeout(2000)  # the first polls settle
                before = len(page.evaluate(TRANSFERRED))
                page.wait_for_timeout(IDLE_S * 1000)
                idle = sum(page.evaluate(TRANSFERRED)[before:]) / IDLE_S
                began = time.perf_counter()
                page.evaluate("location.hash = '#queue'")
                page.wait_for_selector("[data-testid=queue] tbody tr")
                queue.append(time.perf_counter() - began)
                context.close()
        finally:
            browser.close()
    return {
        "first": first, "open": opened, "bytes": downloaded, "files": files, "nodes": drawn,
        "queue": queue, "idle": idle,
    }  # fmt: skip


def table(nodes: int, measured: Measured, *, markdown: bool = False) -> str:
    first = statistics.median(measured.first_paint_s)
    data = statistics.median(measured.data_only_s)
    kept = statistics.median(measured.queue_kept_s)
    listed = statistics.median(measured.pending_list_s)
    rows = [
        ("first paint of the map (median)", f"{first:.3f} s"),
        ("  slowest of the runs", f"{max(measured.first_paint_s):.3f} s"),
        ("open a spine (median)", f"{statistics.median(measured.open_spine_s):.3f} s"),
        ("  nodes drawn then", f"{measured.nodes_drawn:,}"),
        ("downloaded for the first paint", f"{measured.downloaded_bytes / 1024:,.0f} KiB"),
        ("  files and API answers", f"{measured.files}"),
        ("baseline: the map's API answers alone (median)", f"{data:.3f} s"),
        ("first paint / baseline", f"{first / data:.1f}×" if data else "-"),
        ("idle page: downloaded per second", f"{measured.idle_bytes_per_s:,.0f} B/s"),
        ("queue view's first paint (median)", f"{statistics.median(measured.queue_paint_s):.3f} s"),
        ("GET /queue?limit=500 after a write", f"{measured.queue_first_s * 1000:.0f} ms"),
        ("GET /queue?limit=500, order kept (median)", f"{kept * 1000:.0f} ms"),
        ("baseline: pending jobs newest first (median)", f"{listed * 1000:.0f} ms"),
        ("queue kept / baseline", f"{kept / listed:.1f}×" if listed else "-"),
    ]  # fmt: skip
    title = f"{nodes:,} nodes, {measured.running:,} running, {measured.pending:,} pending"
    if markdown:
        lines = [f"| {title} | |", "|---|--:|", *(f"| {name} | {value} |" for name, value in rows)]
        return "\n".join(lines)
    rendered = Table(title=title, box=box.SIMPLE)
    rendered.add_column("measure")
    rendered.add_column("value", justify="right")
    for name, value in rows:
        rendered.add_row(name, value)
    console = Console(width=100, record=True)
    with console.capture() as captured:
        console.print(rendered)
    return captured.get()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, choices=sorted(SHAPES), default=1024)
    parser.add_argument("--running", type=int, default=500)
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    measured = measure(options.nodes, options.running, options.pending, options.repeat)
    print(table(options.nodes, measured, markdown=options.markdown))
    first = statistics.median(measured.first_paint_s)
    verdict = "holds" if first < 1.0 else "does not hold"
    print(f"First paint under 1 s at {options.nodes:,} nodes: {first:.3f} s — the target {verdict}")


if __name__ == "__main__":
    main()
