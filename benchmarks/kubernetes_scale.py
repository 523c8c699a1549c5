"""topoq beside kube-scheduler on one real Kubernetes control plane: the same pods placed by
each, in the same run, on a test bed of KWOK nodes (``topoq.testbeds.kubernetes``).

    python -m benchmarks.kubernetes_scale [--nodes 1024] [--pods 4000] [--gang 8] [--markdown]

- **kube-scheduler**: this process creates every pod (default scheduler, ``--gang`` pods at a
  time named as one group) from 16 threads; kube-scheduler binds them.
- **topoq**: a real ``topoq server --executor kubernetes`` on the bed; this process submits
  the pods as gangs of ``--gang`` pods (``POST /api/v1/jobs``, 8 threads); topoq admits,
  places, creates and binds them (client rates ``--kube-qps``, ``--kube-burst``,
  ``--kube-concurrency``).

Each pod asks for 2 GPUs of a node's 8. Both runs are timed from the first request to the
moment the last pod is bound (a watch on every pod sees ``spec.nodeName``); CPU is user +
system time from ``/proc`` of kube-scheduler, and of topoq's server processes (controller and
API processes). Placement quality is the number of layer-3 domains (the lowest network layer)
each group of ``--gang`` pods spans. Between the runs every pod of the first is deleted and
gone. Nothing here fails on a number: it prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client, watch
from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.api_server import cpu_s
from topoq.testbeds.daemons import BedError, check_alive, recorded
from topoq.testbeds.kubernetes import (
    CONTROL_PLANE,
    BedShape,
    KubernetesBed,
    bring_up,
    tear_down,
)
from topoq.testing.server import RunningServer, api_process_ids, running_server

GPUS_PER_POD = 2
BASELINE_NAMESPACE = "bench-kube"
TEAM = "bench"
LOWEST_LAYER = "topology.k8s.aws/network-node-layer-3"
BED_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 1800.0
STALL_CHECK_S = 5.0
"""How often a wait looks whether the bed's control plane is still up."""
CREATE_THREADS = 16
SUBMIT_THREADS = 8


@dataclass(frozen=True)
class Run:
    scheduler: str
    pods: int
    bound: int
    wall_s: float
    first_bound_s: float
    scheduler_cpu_s: float
    spans: dict[int, int]
    """Layer-3 domains a group spans → how many groups."""
    api_cpu_s: float = 0.0
    """Of ``scheduler_cpu_s``: topoq's API processes (the submissions)."""

    @property
    def pods_per_s(self) -> float:
        return self.bound / self.wall_s if self.wall_s else 0.0

    @property
    def pods_per_cpu_s(self) -> float:
        return self.bound / self.scheduler_cpu_s if self.scheduler_cpu_s else 0.0


class WatchUntil:
    """Watches one kind of object from a thread of its own until ``expected`` of them have
    been counted (``_saw`` says which count); ``first_at`` is when the first one was."""

    what = "objects"

    def __init__(self, list_call: Callable[..., Any], expected: int, *args: Any, **selectors: str):
        self._list, self._args, self._selectors = list_call, args, selectors
        self.expected = expected
        self.first_at: float | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._counted = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _saw(self, raw: dict[str, Any]) -> bool:
        """Record ``raw`` if it counts now (and was not counted before); whether it did."""
        raise NotImplementedError

    def _run(self) -> None:
        listed = self._list(*self._args, limit=1, **self._selectors)
        version = listed.metadata.resource_version
        while not self._stop.is_set():
            for event in watch.Watch().stream(
                self._list,
                *self._args,
                resource_version=version,
                timeout_seconds=30,
                _preload_content=False,
                **self._selectors,
            ):
                raw = event["raw_object"]
                version = raw["metadata"]["resourceVersion"]
                if self._saw(raw):
                    self.first_at = self.first_at or time.monotonic()
                    self._counted += 1
                    if self._counted >= self.expected:
                        self.done.set()
                        return
                if self._stop.is_set():
                    return

    def wait(self, bed: KubernetesBed, timeout_s: float = RUN_TIMEOUT_S) -> None:
        """Until every expected object has been counted. A ``DaemonExited`` as soon as a
        daemon of the bed's control plane is found gone (no pod would ever come), and a
        ``BedError`` saying how many were seen at ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.done.wait(min(STALL_CHECK_S, max(0.0, deadline - time.monotonic()))):
            check_alive(bed.directory, CONTROL_PLANE)
            if time.monotonic() >= deadline:
                raise BedError(
                    f"{self._counted} of {self.expected} {self.what} after {timeout_s:.0f} s",
                    hint=f"see the logs in {bed.directory}",
                )

    def stop(self) -> None:
        self._stop.set()


class BoundWatch(WatchUntil):
    """The pods of a label selector, once bound: their nodes and labels."""

    what = "pods bound"

    def __init__(self, core: Any, selector: str, expected: int) -> None:
        self.nodes: dict[str, str] = {}
        self.labels: dict[str, dict[str, str]] = {}
        super().__init__(core.list_pod_for_all_namespaces, expected, label_selector=selector)

    def _saw(self, raw: dict[str, Any]) -> bool:
        node, name = (raw.get("spec") or {}).get("nodeName"), raw["metadata"]["name"]
        if not node or name in self.nodes:
            return False
        self.nodes[name] = node
        self.labels[name] = raw["metadata"].get("labels") or {}
        return True

    def spans_by(self, label: str, core: Any) -> dict[int, int]:
        """Layer-3 domains the pods of each value of ``label`` span → how many groups."""
        groups: dict[str, list[str]] = defaultdict(list)
        for name, node in self.nodes.items():
            groups[self.labels[name].get(label, name)].append(node)
        return spans(groups, node_layers(core))


def spans(groups: dict[str, list[str]], node_layer: dict[str, str]) -> dict[int, int]:
    found: dict[int, int] = defaultdict(int)
    for nodes in groups.values():
        found[len({node_layer[node] for node in nodes})] += 1
    return dict(sorted(found.items()))


def node_layers(core: Any) -> dict[str, str]:
    return {
        n.metadata.name: n.metadata.labels.get(LOWEST_LAYER, "") for n in core.list_node().items
    }


def pod_manifest(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "kube", "bench-group": group}},
        "spec": {
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {"nvidia.com/gpu": str(GPUS_PER_POD)},
                        "limits": {"nvidia.com/gpu": str(GPUS_PER_POD)},
                    },
                }
            ],
        },
    }


def kube_scheduler_run(bed: KubernetesBed, pods: int, gang: int) -> Run:
    core = client.CoreV1Api(bed.api_client())
    core.create_namespace({"metadata": {"name": BASELINE_NAMESPACE}})
    scheduler = recorded(bed.directory)["scheduler"].pid
    watcher = BoundWatch(core, "bench=kube", pods)
    cpu_before = cpu_s(scheduler)
    began = time.monotonic()
    names = [(f"kube-{i:05d}", f"g{i // gang:05d}") for i in range(pods)]
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(
            pool.map(
                lambda pair: core.create_namespaced_pod(
                    BASELINE_NAMESPACE, pod_manifest(*pair), _preload_content=False
                ),
                names,
            )
        )
    watcher.wait(bed)
    wall = time.monotonic() - began
    watcher.stop()
    return Run(
        "kube-scheduler",
        pods,
        len(watcher.nodes),
        wall,
        (watcher.first_at or began) - began,
        cpu_s(scheduler) - cpu_before,
        watcher.spans_by("bench-group", core),
    )


def delete_baseline(bed: KubernetesBed) -> None:
    core = client.CoreV1Api(bed.api_client())
    core.delete_collection_namespaced_pod(BASELINE_NAMESPACE, grace_period_seconds=0)
    deadline = time.monotonic() + 300
    while core.list_namespaced_pod(BASELINE_NAMESPACE, limit=1).items:
        if time.monotonic() > deadline:
            raise RuntimeError("the kube-scheduler run's pods did not go within 300 s")
        time.sleep(0.5)


def policy(nodes: int) -> str:
    return f"""\
apiVersion: topoq.io/v1
kind: Policy
metadata: {{name: kubernetes-benchmark}}
teams:
- name: {TEAM}
  quotas:
  - {{flavor: ml.p5.48xlarge, instances: {nodes}}}
"""


def gang_request(name: str, pods: int) -> dict[str, Any]:
    return {
        "format": "topoq",
        "team": TEAM,
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "podSets": [
                    {
                        "name": "w",
                        "count": pods,
                        "requests": {"nvidia.com/gpu": GPUS_PER_POD},
                        "topology": {"preferred": LOWEST_LAYER},
                        "environment": {"TOPOQ_SLEEP_S": "36000"},
                    }
                ]
            },
        },
    }


@contextlib.contextmanager
def topoq_server(bed: KubernetesBed, directory: Path, rates: list[str]) -> Iterator[RunningServer]:
    """A real server on the bed (``topoq.testing.server.running_server``), its team's quota
    every node."""
    directory.mkdir(parents=True, exist_ok=True)
    policy_file = directory / "policy.yaml"
    policy_file.write_text(policy(len(bed.nodes)))
    options = ["--executor", "kubernetes", "--kubeconfig", str(bed.kubeconfig), *rates]
    with running_server(directory / "data", *options, policy=policy_file) as server:
        yield server


def admin_client(server: RunningServer) -> httpx.Client:
    token = (server.data_dir / "admin-token").read_text().strip()
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def server_pids(server: RunningServer) -> list[int]:
    """The controller process, then its API processes."""
    return [server.process.pid, *api_process_ids(server.process.pid)]


def topoq_run(bed: KubernetesBed, pods: int, gang: int, directory: Path, rates: list[str]) -> Run:
    core = client.CoreV1Api(bed.api_client())
    with topoq_server(bed, directory, rates) as server, admin_client(server) as http:
        wait_for(lambda: len(http.get("/nodes").json()) == len(bed.nodes), 120, "topoq's nodes")
        watcher = BoundWatch(core, "app.kubernetes.io/managed-by=topoq", pods)
        controller_before = cpu_s(server.process.pid)
        api_before = sum(cpu_s(pid) for pid in server_pids(server)[1:])
        began = time.monotonic()
        sizes = [gang] * (pods // gang) + ([pods % gang] if pods % gang else [])

        def submit(index: int) -> None:
            answer = http.post("/jobs", json=gang_request(f"gang-{index:05d}", sizes[index]))
            if answer.status_code != 201:
                raise RuntimeError(f"submission refused: {answer.text}")

        with ThreadPoolExecutor(SUBMIT_THREADS) as pool:
            list(pool.map(submit, range(len(sizes))))
        watcher.wait(bed)
        wall = time.monotonic() - began
        watcher.stop()
        api_cpu = sum(cpu_s(pid) for pid in server_pids(server)[1:]) - api_before
        cpu = cpu_s(server.process.pid) - controller_before + api_cpu
    return Run(
        "topoq",
        pods,
        len(watcher.nodes),
        wall,
        (watcher.first_at or began) - began,
        cpu,
        watcher.spans_by("topoq.io/job", core),
        api_cpu,
    )


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)


def render(runs: list[Run], nodes: int, gang: int, markdown: bool) -> str:
    kube = next(r for r in runs if r.scheduler == "kube-scheduler")
    table = Table(
        title=f"{nodes} KWOK nodes, {kube.pods} pods of {GPUS_PER_POD} GPUs, groups of {gang}",
        box=box.MARKDOWN if markdown else box.SIMPLE,
    )
    for column in (
        "scheduler", "bound", "wall s", "first bound s", "pods/s", "scheduler CPU s", "of it API s",
        "pods per CPU s", "vs kube-scheduler (per CPU s)", "layer-3 domains per group",
    ):  # fmt: skip
        table.add_column(column)
    for run in runs:
        table.add_row(
            run.scheduler,
            f"{run.bound}/{run.pods}",
            f"{run.wall_s:.1f}",
            f"{run.first_bound_s:.2f}",
            f"{run.pods_per_s:.0f}",
            f"{run.scheduler_cpu_s:.1f}",
            f"{run.api_cpu_s:.1f}" if run.scheduler == "topoq" else "-",
            f"{run.pods_per_cpu_s:.0f}",
            f"{run.pods_per_cpu_s / kube.pods_per_cpu_s:.2f}×" if kube.pods_per_cpu_s else "-",
            ", ".join(f"{k}: {v}" for k, v in run.spans.items()),
        )
    buffer = Console(width=200, record=True, file=io.StringIO())
    buffer.print(table)
    return buffer.export_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.kubernetes_scale", description=__doc__
    )
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--gang", type=int, default=8)
    parser.add_argument("--kube-qps", type=float, default=400.0)
    parser.add_argument("--kube-burst", type=int, default=800)
    parser.add_argument("--kube-concurrency", type=int, default=16)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the runs here")
    args = parser.parse_args(argv)
    rates = [
        "--kube-qps", str(args.kube_qps), "--kube-burst", str(args.kube_burst),
        "--kube-concurrency", str(args.kube_concurrency),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="topoq-k8s-bench-") as work:
        directory = Path(work)
        print(f"bringing up {args.nodes} KWOK nodes…", flush=True)
        bed = bring_up(
            directory / "bed", BedShape(args.nodes, 3), ports="free", timeout_s=BED_TIMEOUT_S
        )
        try:
            runs = [kube_scheduler_run(bed, args.pods, args.gang)]
            print(f"kube-scheduler: {runs[0]}", flush=True)
            delete_baseline(bed)
            runs.append(topoq_run(bed, args.pods, args.gang, directory / "topoq", rates))
            print(f"topoq: {runs[1]}", flush=True)
        finally:
            tear_down(directory / "bed")
    print(render(runs, args.nodes, args.gang, args.markdown))
    if args.json is not None:
        args.json.write_text(json.dumps([run.__dict__ for run in runs], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
