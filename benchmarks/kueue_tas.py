"""topoq beside real Kueue (Topology-Aware Scheduling on) admitting the same suspended
``batch/v1`` Jobs on one KWOK test bed, in one run (``topoq.testbeds.kubernetes``).

    python -m benchmarks.kueue_tas [--nodes 1024] [--jobs 500] [--pods 8] [--markdown]

- **Kueue**: the bed's Kueue 0.17 with a Topology of the bed's levels, a ResourceFlavor on it,
  a ClusterQueue holding every GPU and a LocalQueue; this process creates ``--jobs`` Jobs of
  ``--pods`` pods of 2 GPUs (Indexed, suspended, ``podset-preferred-topology`` the lowest
  network layer); Kueue admits them (unsuspends, with its topology assignment) and
  kube-scheduler binds the pods.
- **topoq**: Kueue is stopped (its webhooks removed), the Jobs are deleted, and a real
  ``topoq server --executor kubernetes`` takes the same Jobs in from the cluster
  (docs/executors.md, "Jobs already on the cluster"), admits them, pins each pod to its placed
  node, and kube-scheduler binds the pods.

Both are timed from the first Job created: time to the first and the last admission (the Job
seen unsuspended on a watch) and to the last pod bound; CPU from ``/proc`` of the admitting
scheduler (Kueue's process; topoq's controller and API processes) and of kube-scheduler, which
binds in both runs; the layer-3 domains each Job's pods span, and the nodes in use. The pods
run until the end (KWOK's completion is put off). Nothing here fails on a number.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client
from rich import box
from rich.console import Console
from rich.table import Table

from benchmarks.api_server import cpu_s
from benchmarks.kubernetes_scale import (
    BED_TIMEOUT_S,
    GPUS_PER_POD,
    LOWEST_LAYER,
    TEAM,
    BoundWatch,
    WatchUntil,
    server_pids,
    topoq_server,
)
from topoq.testbeds.daemons import kill_daemon, recorded
from topoq.testbeds.kubernetes import BedShape, KubernetesBed, bring_up, tear_down

NAMESPACE = TEAM
"""The team's namespace, and its queue's name (as ``topoq policy export --to kueue`` names)."""
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
OBJECTS = "bench"
LEVELS = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)] + [
    "kubernetes.io/hostname"
]
JOB_LABEL = ("bench", "kueue-tas")
CREATE_THREADS = 8


@dataclass(frozen=True)
class Admissions:
    scheduler: str
    jobs: int
    admitted: int
    first_admitted_s: float
    last_admitted_s: float
    last_bound_s: float
    scheduler_cpu_s: float
    binder_cpu_s: float
    """kube-scheduler's CPU in the same run (it binds the pods in both)."""
    nodes_used: int
    spans: dict[int, int]

    @property
    def admissions_per_s(self) -> float:
        return self.admitted / self.last_admitted_s if self.last_admitted_s else 0.0

    @property
    def admissions_per_cpu_s(self) -> float:
        return self.admitted / self.scheduler_cpu_s if self.scheduler_cpu_s else 0.0


class AdmittedWatch(WatchUntil):
    """When each Job of the benchmark is first seen unsuspended."""

    what = "Jobs admitted"

    def __init__(self, batch: Any, expected: int) -> None:
        self.at: dict[str, float] = {}
        super().__init__(
            batch.list_namespaced_job, expected, NAMESPACE, label_selector="=".join(JOB_LABEL)
        )

    def _saw(self, raw: dict[str, Any]) -> bool:
        name = raw["metadata"]["name"]
        if raw["spec"].get("suspend") is not False or name in self.at:
            return False
        self.at[name] = time.monotonic()
        return True


def job_manifest(name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": NAMESPACE, JOB_LABEL[0]: JOB_LABEL[1]},
        },
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "parallelism": pods,
            "completions": pods,
            "template": {
                "metadata": {
                    "labels": {JOB_LABEL[0]: JOB_LABEL[1]},
                    "annotations": {
                        "kueue.x-k8s.io/podset-preferred-topology": LOWEST_LAYER,
                        "pod-complete.stage.kwok.x-k8s.io/delay": "36000s",
                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "36000s",
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
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
            },
        },
    }


def kueue_objects(bed: KubernetesBed) -> None:
    custom = client.CustomObjectsApi(bed.api_client())

    def make(kind: str, plural: str, spec: dict[str, Any], namespace: str | None = None) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": OBJECTS, **({"namespace": namespace} if namespace else {})},
            "spec": spec,
        }
        if namespace:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
        else:
            custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    make("Topology", "topologies", {"levels": [{"nodeLabel": level} for level in LEVELS]})
    make(
        "ResourceFlavor",
        "resourceflavors",
        {"nodeLabels": {"type": "kwok"}, "topologyName": OBJECTS},
    )
    quota = 8 * len(bed.nodes)
    make(
        "ClusterQueue",
        "clusterqueues",
        {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": OBJECTS,
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}],
                        }
                    ],
                }
            ],
        },
    )
    make("LocalQueue", "localqueues", {"clusterQueue": OBJECTS}, NAMESPACE)


def admit(
    bed: KubernetesBed, scheduler: str, prefix: str, jobs: int, pods: int, pids: Any
) -> Admissions:
    """Create the Jobs and wait until every one is admitted and every pod bound."""
    api = bed.api_client()
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    binder = recorded(bed.directory)["scheduler"].pid
    admitted = AdmittedWatch(batch, jobs)
    bound = BoundWatch(core, "=".join(JOB_LABEL), jobs * pods)
    cpu_before, binder_before = sum(cpu_s(p) for p in pids()), cpu_s(binder)
    began = time.monotonic()
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(
            pool.map(
                lambda i: batch.create_namespaced_job(
                    NAMESPACE, job_manifest(f"{prefix}-{i:05d}", pods), _preload_content=False
                ),
                range(jobs),
            )
        )
    admitted.wait(bed)
    bound.wait(bed)
    ended = time.monotonic()
    admitted.stop()
    bound.stop()
    cpu, binder_cpu = sum(cpu_s(p) for p in pids()) - cpu_before, cpu_s(binder) - binder_before
    times = sorted(admitted.at.values())
    return Admissions(
        scheduler,
        jobs,
        len(times),
        (times[0] - began) if times else 0.0,
        (times[-1] - began) if times else 0.0,
        ended - began if bound.done.is_set() else float("nan"),
        cpu,
        binder_cpu,
        len(set(bound.nodes.values())),
        bound.spans_by("batch.kubernetes.io/job-name", core),
    )


def stop_kueue(bed: KubernetesBed) -> None:
    """Kueue away for good: its process, its webhooks (which would refuse every Job), the Jobs
    it admitted and their pods."""
    kill_daemon(bed.directory, "kueue")
    api = bed.api_client()
    hooks = client.AdmissionregistrationV1Api(api)
    for found in hooks.list_mutating_webhook_configuration().items:
        if "kueue" in found.metadata.name:
            hooks.delete_mutating_webhook_configuration(found.metadata.name)
    for found in hooks.list_validating_webhook_configuration().items:
        if "kueue" in found.metadata.name:
            hooks.delete_validating_webhook_configuration(found.metadata.name)
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.delete_collection_namespaced_job(NAMESPACE, propagation_policy="Background")
    core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
    deadline = time.monotonic() + 300
    while (
        core.list_namespaced_pod(NAMESPACE, limit=1).items
        or batch.list_namespaced_job(NAMESPACE, limit=1).items
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("Kueue's Jobs and pods did not go within 300 s")
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        time.sleep(1)


def render(runs: list[Admissions], nodes: int, pods: int, markdown: bool) -> str:
    kueue = runs[0]
    table = Table(
        title=f"{nodes} KWOK nodes, {kueue.jobs} Jobs of {pods} pods × {GPUS_PER_POD} GPUs",
        box=box.MARKDOWN if markdown else box.SIMPLE,
    )
    for column in (
        "scheduler", "admitted", "first s", "last s", "all bound s", "admissions/s",
        "scheduler CPU s", "admissions per CPU s", "vs Kueue (per CPU s)",
        "kube-scheduler CPU s", "nodes used", "layer-3 domains per Job",
    ):  # fmt: skip
        table.add_column(column)
    for run in runs:
        ratio = (
            run.admissions_per_cpu_s / kueue.admissions_per_cpu_s if kueue.scheduler_cpu_s else 0
        )
        table.add_row(
            run.scheduler,
            f"{run.admitted}/{run.jobs}",
            f"{run.first_admitted_s:.2f}",
            f"{run.last_admitted_s:.1f}",
            f"{run.last_bound_s:.1f}",
            f"{run.admissions_per_s:.1f}",
            f"{run.scheduler_cpu_s:.1f}",
            f"{run.admissions_per_cpu_s:.1f}",
            f"{ratio:.2f}×",
            f"{run.binder_cpu_s:.1f}",
            str(run.nodes_used),
            ", ".join(f"{k}: {v}" for k, v in run.spans.items()),
        )
    buffer = Console(width=220, record=True, file=io.StringIO())
    buffer.print(table)
    return buffer.export_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kueue_tas", description=__doc__)
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the runs here")
    args = parser.parse_args(argv)
    rates = ["--kube-qps", "400", "--kube-burst", "800", "--kube-concurrency", "16"]
    with tempfile.TemporaryDirectory(prefix="topoq-kueue-bench-") as work:
        directory = Path(work)
        print(f"bringing up {args.nodes} KWOK nodes and Kueue…", flush=True)
        bed = bring_up(
            directory / "bed",
            BedShape(args.nodes, 3),
            kueue=True,
            ports="free",
            timeout_s=BED_TIMEOUT_S,
        )
        try:
            client.CoreV1Api(bed.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
            kueue_objects(bed)
            time.sleep(2)  # the queues become active
            kueue_pid = recorded(bed.directory)["kueue"].pid
            runs = [admit(bed, "Kueue (TAS)", "kueue", args.jobs, args.pods, lambda: [kueue_pid])]
            print(f"Kueue: {runs[0]}", flush=True)
            stop_kueue(bed)
            with topoq_server(bed, directory / "topoq", rates) as server:
                pids = partial(server_pids, server)
                runs.append(admit(bed, "topoq", "topoq", args.jobs, args.pods, pids))
            print(f"topoq: {runs[1]}", flush=True)
        finally:
            tear_down(directory / "bed")
    print(render(runs, args.nodes, args.pods, args.markdown))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(run) for run in runs], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
