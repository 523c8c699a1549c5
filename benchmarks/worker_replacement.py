"""How long clients wait when an API process dies under load: the time from SIGKILL of the
serving API process to the next successful request, over several kills, with a warmed spare
(``--api-spares 1``, the default) and without (``--api-spares 0``: a cold start), each on a
fresh server in the same run.

    python -m benchmarks.worker_replacement [--kills 5] [--clients 8] [--markdown]

The server is a real ``python -m topoq.bootstrap`` (SQLite, local executor, one API process);
``--clients`` threads of this process send ``GET /api/v1/jobs/{id}`` back to back, each on its
own keep-alive connection (reconnecting after an error), so the killed process always has
requests in flight and the backlog fills while nobody accepts. This is a benchmark, not a
timed test: it prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import signal
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.api_server import HOST, RunningServer, running_server
from topoq.testing.server import (
    serving_api_process_ids,
    spare_api_process_ids,
    whole_node_submission,
)

SETTLE_S = 6.0
"""Load before each kill; also more than a worker must live not to count as a fast death."""
READY_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 60.0


@dataclass
class Load:
    """Clients that send requests back to back and remember, for each success, when it was
    sent and when its answer arrived."""

    server: RunningServer
    clients: int
    path: str
    successes: list[tuple[float, float]] = field(default_factory=list)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Load:
        self._threads = [
            threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT_S)

    def first_success_after(self, moment: float, timeout_s: float) -> float | None:
        """When the first request sent after ``moment`` was answered (an answer already on
        its way at ``moment`` does not count)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                later = [done for sent, done in self.successes if sent > moment]
            if later:
                return min(later)
            time.sleep(0.005)
        return None

    def _client(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}"}
        connection: http.client.HTTPConnection | None = None
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection(
                        HOST, self.server.port, timeout=REQUEST_TIMEOUT_S
                    )
                connection.request("GET", self.path, headers=headers)
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                if connection is not None:
                    connection.close()
                connection = None
            with self._lock:
                if ok:
                    self.successes.append((sent, time.monotonic()))
                else:
                    self.failures += 1


@dataclass(frozen=True)
class Result:
    spares: int
    gaps_s: list[float]
    failures: int
    missed: int
    """Kills after which no request succeeded within the timeout."""


def measure(spares: int, kills: int, clients: int) -> Result:
    with (
        tempfile.TemporaryDirectory(prefix="topoq-bench-kill-") as directory,
        running_server(Path(directory), None, ("--api-spares", str(spares))) as server,
    ):
        _submit_one(server)
        gaps, missed = [], 0
        with Load(server, clients, "/api/v1/jobs/probe") as load:
            for _ in range(kills):
                victim = _steady(server, spares)
                time.sleep(SETTLE_S)
                killed = time.monotonic()
                os.kill(victim, signal.SIGKILL)
                answered = load.first_success_after(killed, READY_TIMEOUT_S)
                if answered is None:
                    missed += 1
                else:
                    gaps.append(answered - killed)
            failures = load.failures
        return Result(spares, gaps, failures, missed)


def _submit_one(server: RunningServer) -> None:
    body = json.dumps(whole_node_submission("probe", "nlp")).encode()
    request = urllib.request.Request(
        f"{server.url}/api/v1/jobs",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S):
        pass


def _steady(server: RunningServer, spares: int) -> int:
    """The serving API process, once it serves and (with spares) a spare is warmed."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        serving = serving_api_process_ids(server.process.pid)
        if len(serving) == 1 and len(spare_api_process_ids(server.process.pid)) >= spares:
            return serving[0]
        time.sleep(0.05)
    raise RuntimeError("the server did not settle: no serving API process (and spare)")


def table(results: Sequence[Result], markdown: bool) -> str:
    baseline = next((r for r in results if r.spares == 0), results[0])
    header = ["--api-spares", "kills", "median s", "min s", "max s", "failed requests", "ratio"]
    rows = []
    for result in results:
        gaps = result.gaps_s or [float("nan")]
        ratio = statistics.median(gaps) / statistics.median(baseline.gaps_s or [float("nan")])
        rows.append(
            [
                str(result.spares),
                f"{len(result.gaps_s)}" + (f" (+{result.missed} missed)" if result.missed else ""),
                f"{statistics.median(gaps):.2f}",
                f"{min(gaps):.2f}",
                f"{max(gaps):.2f}",
                f"{result.failures:,}",
                f"{ratio:.2f}×",
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    rich = Table(box=box.SIMPLE)
    for column in header:
        rich.add_column(column, justify="right")
    for row in rows:
        rich.add_row(*row)
    console = Console(width=120, file=io.StringIO(), record=True)
    console.print(rich)
    return console.export_text()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker_replacement")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    results = [measure(spares, args.kills, args.clients) for spares in (0, 1)]
    print(table(results, args.markdown))
    print("time from SIGKILL of the serving API process to the next successful request")


if __name__ == "__main__":
    main()
