"""A light HTTP load generator: ``clients`` threads, each with one keep-alive ``http.client``
connection, send a fixed list of requests (localhost only).

Closed loop (``rate_per_s=None``): every client sends its next request as soon as the previous
answer arrived, so the server is saturated and, by Little's law, mean latency = clients /
throughput. Paced (``rate_per_s``): request *i* is due at ``start + i / rate``; its latency is
measured from when it was due, not from when a client got round to it, so a stalled server
shows up in the percentiles (no coordinated omission).
"""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.placement import percentile

TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes | None = None


@dataclass
class LoadResult:
    """What one run of the load generator saw."""

    requests: int
    clients: int
    duration_s: float
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    client_cpu_s: float = 0.0
    """CPU time the load generator itself used (all its threads)."""

    @property
    def succeeded(self) -> int:
        return sum(count for status, count in self.statuses.items() if 200 <= status < 300)

    @property
    def all_succeeded(self) -> bool:
        return self.succeeded == self.requests

    @property
    def per_s(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    def p50_ms(self) -> float:
        return percentile(self.latencies_ns, 50) / 1e6 if self.latencies_ns else 0.0

    def p99_ms(self) -> float:
        return percentile(self.latencies_ns, 99) / 1e6 if self.latencies_ns else 0.0


def run_load(
    host: str,
    port: int,
    token: str,
    requests: Sequence[Request],
    *,
    clients: int,
    rate_per_s: float | None = None,
) -> LoadResult:
    """Send every request once, spread over ``clients`` threads; returns when all answered."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    result = LoadResult(requests=len(requests), clients=clients, duration_s=0.0)
    lock = threading.Lock()
    ready = threading.Barrier(clients + 1)
    next_index = itertools.count()
    start = [0.0]

    def client() -> None:
        connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
        connection.connect()
        ready.wait()
        while (index := next(next_index)) < len(requests):
            due = start[0] + index / rate_per_s if rate_per_s else None
            if due is not None and (wait_s := due - time.perf_counter()) > 0:
                time.sleep(wait_s)
            began = time.perf_counter_ns()
            status = _send(connection, requests[index], headers)
            ended = time.perf_counter_ns()
            if due is not None:
                began = min(began, int(due * 1e9))
            with lock:
                if status is None:
                    result.transport_errors += 1
                else:
                    result.statuses[status] += 1
                result.latencies_ns.append(ended - began)
        connection.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = time.process_time()
    start[0] = time.perf_counter()
    ready.wait()
    for thread in threads:
        thread.join()
    result.duration_s = time.perf_counter() - start[0]
    result.client_cpu_s = time.process_time() - cpu_before
    return result


def _send(
    connection: http.client.HTTPConnection, request: Request, headers: dict[str, str]
) -> int | None:
    """The answer's status, or None when the connection failed (it is reopened)."""
    try:
        connection.request(request.method, request.path, body=request.body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        connection.close()
        return None
