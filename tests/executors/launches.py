"""Gang launches for executor tests: jobs placed by a real scheduling cycle on a small GPU
cluster, and small helpers to wait for events and check processes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from topoq.domain.governance import TeamName
from topoq.domain.job import Allocation, JobId, JobPhase, JobSpec, JobView
from topoq.domain.node import NodeSpec
from topoq.domain.workload import PodSetSpec
from topoq.engine.ports import Executor, ExecutorEvent, GangLaunch
from topoq.testing.builders import gpu_pods, workload
from topoq.testing.governance import Cluster, gpu_cluster, policy, team

SHAPE = (1, 2, 2)
"""One spine, two blocks of two nodes (n00 … n03), eight GPUs each."""
Command = tuple[str, ...]


def python(code: str) -> Command:
    """A pod command that runs ``code`` with this test run's Python."""
    return (sys.executable, "-c", code)


def gang(job_id: str, *pod_sets: PodSetSpec, team_name: str = "t") -> JobView:
    """A job of ``team_name`` with ``pod_sets`` (default: two pods of eight GPUs called
    "workers")."""
    sets = pod_sets or (gpu_pods(2, gpus=8),)
    spec = JobSpec(JobId(job_id), TeamName(team_name), workload(*sets, name=job_id), 0.0)
    return JobView(spec)


@dataclass
class Placed:
    """Jobs admitted together by one cycle, so their allocations never overlap."""

    nodes: Mapping[str, NodeSpec]
    levels: tuple[str, ...]
    jobs: Mapping[JobId, JobView]

    def allocation(self, job_id: str) -> Allocation:
        allocation = self.jobs[JobId(job_id)].allocation
        assert allocation is not None, f"{job_id} was not admitted"
        return allocation

    def launch(
        self,
        job_id: str,
        *,
        command: Command | None = None,
        commands: Mapping[str, Command] | None = None,
        environment: Mapping[str, str] | None = None,
        attempt: int = 1,
    ) -> GangLaunch:
        """The launch of ``job_id``; ``command`` runs in every pod set unless ``commands``."""
        view = self.jobs[JobId(job_id)]
        allocation = self.allocation(job_id)
        names = [pod_set.name for pod_set in view.spec.workload.pod_sets]
        argv = dict(commands or {}) or (dict.fromkeys(names, command) if command else {})
        used = sorted(allocation.nodes)
        return GangLaunch(
            job=view.spec,
            allocation=allocation,
            attempt=attempt,
            node_labels={n: self._topology_labels(n) for n in used},
            commands=argv,
            environment=dict(environment or {}),
            node_allocatable={n: self.nodes[n].allocatable for n in used},
        )

    def _topology_labels(self, node: str) -> dict[str, str]:
        labels = self.nodes[node].labels
        return {level: labels[level] for level in self.levels if level in labels}


def place(
    *jobs: JobView, shape: Sequence[int] = SHAPE, labels: Mapping[str, str] | None = None
) -> Placed:
    """Run one cycle over ``jobs`` and return them placed (each must be admitted); ``labels``
    on every node (e.g. opening their GPUs to shares)."""
    nodes, spec = gpu_cluster(shape, labels=labels)
    teams = sorted({str(job.team) for job in jobs} | {"t"})
    quotas = policy(*(team(name, 1000) for name in teams))
    cluster = Cluster.of(shape, quotas, *jobs, labels=labels)
    cluster.cycle()
    for view in cluster.jobs.values():
        assert view.phase is JobPhase.RUNNING, f"{view.id} was not admitted: {cluster.last}"
    return Placed({n.name: n for n in nodes}, spec.levels, dict(cluster.jobs))


def poll_until(
    executor: Executor,
    done: Callable[[list[ExecutorEvent]], bool],
    timeout_s: float = 10.0,
    seen: list[ExecutorEvent] | None = None,
) -> list[ExecutorEvent]:
    """Poll until ``done(events so far)``; the events are also appended to ``seen``."""
    events: list[ExecutorEvent] = [] if seen is None else seen
    deadline = time.monotonic() + timeout_s
    while True:
        events.extend(executor.poll())
        if done(events):
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s; events: {events}")
        time.sleep(0.02)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}")
        time.sleep(0.02)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # reaped between the two looks (ESRCH on read)
        return not Path("/proc").is_dir()  # gone meanwhile, or no /proc to tell zombies by
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in {"Z", "X"}
