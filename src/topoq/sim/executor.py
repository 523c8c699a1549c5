"""The simulator's executor: gangs run on a virtual clock, paced by the cost model.

:class:`SimulatedExecutor` is the ``Executor`` port (``topoq.engine.ports``) that the real
controller drives when the simulator replays a scenario or a trace (``sim.controlled``): a
gang is STARTED at once and EXITED when its work is done, with the exit code of that run (a
job's ``exit_codes``: one per run that runs to its end, the last repeating); a victim is
STOPPED ``stop_delay_s`` after it was asked to stop (never later than the grace period); a
failed node's gangs are lost (NODE_LOST).

Under the communication cost model (``sim.network``) a gang's work is done at its pace: a
run's remaining work times its slow-down, which moves whenever a gang whose traffic crosses the
same oversubscribed domain starts or stops; each move reschedules the run's end from the work
it has done. Time limits are not the executor's: the controller fails a job past its limit
and has its pods stopped, as a server does.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from topoq.core.tree import TopologyTree
from topoq.domain.job import JobId, JobSpec
from topoq.domain.node import NodeName
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.ports import (
    ExecutorCapabilities,
    ExecutorEvent,
    ExecutorEventKind,
    GangLaunch,
)
from topoq.sim.network import NetworkModel, NetworkState, default_communication_share


class VirtualClock:
    """The controller's clock: the simulated time, moved by the driver only."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class _Run:
    """One run of a gang, and its progress."""

    attempt: int
    nodes: frozenset[str]
    runtime_s: float
    """Its run time at its tightest placement alone (the job's)."""
    work_s: float
    """What is left of it as of ``since_s``."""
    started_s: float
    since_s: float
    exit_code: int
    slowdown: float = 1.0
    exits: int = 0
    """The sequence number of its EXITED report due (an earlier one is stale)."""


class SimulatedExecutor:
    """Runs gangs on the virtual clock (see the module's docstring)."""

    capabilities = ExecutorCapabilities(
        "simulated", runs_real_processes=False, can_fail_nodes=True, captures_logs=False
    )

    def __init__(
        self,
        clock: VirtualClock,
        exit_codes: Mapping[JobId, tuple[int, ...]],
        stop_delay_s: float = 0.0,
        *,
        network: NetworkModel | None = None,
        tree: Callable[[], TopologyTree] | None = None,
        shares: Mapping[JobId, float] | None = None,
    ) -> None:
        """``network``: the cost model that paces runs (None: a gang runs for its run time
        wherever it lands); ``tree``: the cluster's tree as the controller places on it now
        (needed with ``network``); ``shares``: each job's communication share where its
        submission gave one (else ``default_communication_share`` by its GPUs)."""
        if network is not None and tree is None:
            raise ValueError("a cost model needs the cluster's tree")
        self.clock = clock
        self.exit_codes = exit_codes
        self.stop_delay_s = stop_delay_s
        self.network = network
        self._tree_now = tree
        self._shares = shares or {}
        self._traffic: NetworkState | None = None
        self._runs: dict[JobId, _Run] = {}
        self._launches: dict[JobId, tuple[JobSpec, dict[str, int]]] = {}
        """Each running gang's job and GPUs by node, to put it on a rebuilt tree's network."""
        self._ended: dict[JobId, int] = {}
        """How many runs of each job ran to their end (and so which exit code is next)."""
        self.run_slowdowns: dict[JobId, float] = {}
        """The slow-down of each job's last run that ran to its end, over its whole run
        (under the cost model only)."""
        self._due: list[tuple[float, int, ExecutorEvent]] = []
        self._made = 0

    # --- the port -------------------------------------------------------------------
    def start(self, launch: GangLaunch) -> None:
        spec, now, attempt = launch.job, self.clock(), launch.attempt
        job = spec.id
        codes = self.exit_codes.get(job, (0,))
        code = codes[min(self._ended.get(job, 0), len(codes) - 1)]
        runtime = spec.runtime_s or 0.0
        on_nodes = launch.allocation.resources_on_node.items()
        gpus = {name: resources.amount(NVIDIA_GPU) for name, resources in on_nodes}
        run = _Run(attempt, frozenset(gpus), runtime, runtime, now, now, code)
        self._runs[job] = run
        self._report(now, ExecutorEvent(ExecutorEventKind.STARTED, now, job, attempt))
        touched: set[JobId] = set()
        if self.network is not None:
            traffic = self._traffic_now()  # before this gang is known: not put on it twice
            self._launches[job] = (spec, gpus)
            touched = self._start_traffic(traffic, spec, gpus)
            run.slowdown = traffic.slowdown(job)
        self._schedule_exit(job, run)
        self._repace(touched)

    def cancel(self, job: JobId) -> None:
        self._end_run(job)

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        for job in jobs:
            self.cancel(job)

    def stop(self, job: JobId, grace_s: float) -> None:
        run = self._end_run(job)
        at = self.clock() + min(self.stop_delay_s, grace_s)
        attempt = run.attempt if run is not None else 0
        self._report(at, ExecutorEvent(ExecutorEventKind.STOPPED, at, job, attempt))

    def poll(self) -> list[ExecutorEvent]:
        now, events = self.clock(), []
        while self._due and self._due[0][0] <= now:
            _, made, event = heapq.heappop(self._due)
            if event.kind is ExecutorEventKind.STOPPED or event.kind is ExecutorEventKind.NODE_LOST:
                events.append(event)
                continue
            job = event.job
            run = self._runs.get(job) if job is not None else None
            if job is None or run is None or run.attempt != event.attempt:
                continue  # the run was stopped, cancelled or lost meanwhile
            if event.kind is ExecutorEventKind.EXITED:
                if made != run.exits:
                    continue  # rescheduled: its pace moved
                if self.network is not None and run.runtime_s > 0:
                    self.run_slowdowns[job] = (now - run.started_s) / run.runtime_s
                self._end_run(job)
                self._ended[job] = self._ended.get(job, 0) + 1
            events.append(event)
        return events

    def fail_node(self, node: str) -> None:
        now = self.clock()
        for job, run in list(self._runs.items()):
            if node in run.nodes:
                self._end_run(job)
        self._report(now, ExecutorEvent(ExecutorEventKind.NODE_LOST, now, node=node))

    def recover_node(self, node: str) -> None:
        """Nothing to undo: a node marked healthy takes gangs again."""

    def logs(self, job: JobId, pod: int | None = None) -> str:
        return ""

    def close(self) -> None:
        self._runs.clear()

    def inventory_changes(self) -> None:
        return None

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        return set()

    # --- for the driver ---------------------------------------------------------------
    def next_at(self) -> float | None:
        """When the next report is due (None: none)."""
        return self._due[0][0] if self._due else None

    def slowdown(self, job: JobId) -> float:
        """The running job's slow-down now (1 without a cost model)."""
        run = self._runs.get(job)
        return run.slowdown if run is not None else 1.0

    # --- runs and their pace ------------------------------------------------------------
    def _report(self, at_s: float, event: ExecutorEvent) -> int:
        made = self._made
        heapq.heappush(self._due, (at_s, made, event))
        self._made += 1
        return made

    def _schedule_exit(self, job: JobId, run: _Run) -> None:
        """The run's end when its work is done at its pace (an earlier one goes stale)."""
        ends = self.clock() + run.work_s * run.slowdown
        exited = ExecutorEvent(
            ExecutorEventKind.EXITED, ends, job, run.attempt, exit_code=run.exit_code
        )
        run.exits = self._report(ends, exited)

    def _end_run(self, job: JobId) -> _Run | None:
        """The job's run stopped (ran to its end, stopped, cancelled, lost): its traffic with
        it, and the runs whose pace that moves go on at their new one."""
        run = self._runs.pop(job, None)
        if self._launches.pop(job, None) is not None and self._traffic is not None:
            self._repace(self._traffic.end(job))
        return run

    def _traffic_now(self) -> NetworkState:
        """The traffic on the tree the controller places on now; when it was rebuilt (a node
        failed or recovered), the running gangs are put on the new one (their paces move when
        a gang starting or stopping next touches them)."""
        assert self.network is not None and self._tree_now is not None
        tree = self._tree_now()
        if self._traffic is None or self._traffic.tree is not tree:
            self._traffic = NetworkState(tree, self.network)
            for spec, gpus in self._launches.values():
                if spec.id in self._runs:
                    self._start_traffic(self._traffic, spec, gpus)
        return self._traffic

    def _start_traffic(
        self, traffic: NetworkState, spec: JobSpec, gpus: Mapping[str, int]
    ) -> set[JobId]:
        """The job's gang on ``traffic``'s network; the running jobs whose slow-down that
        moves."""
        index = traffic.tree.node_index
        on_nodes = {
            index[NodeName(name)]: count for name, count in gpus.items() if NodeName(name) in index
        }
        pods = [
            pod_set.requests.amount(NVIDIA_GPU)
            for pod_set in spec.workload.pod_sets
            for _ in range(pod_set.count)
        ]
        share = self._shares.get(spec.id, default_communication_share(sum(pods)))
        return traffic.start(spec.id, on_nodes, pods, share)

    def _repace(self, jobs: set[JobId]) -> None:
        """The jobs' slow-downs moved: each goes on from what it has done at its new pace."""
        if not jobs or self._traffic is None:
            return
        now = self.clock()
        for job in jobs:
            run = self._runs.get(job)
            if run is None:
                continue
            slowdown = self._traffic.slowdown(job)
            if slowdown == run.slowdown:
                continue
            run.work_s = max(0.0, run.work_s - (now - run.since_s) / run.slowdown)
            run.since_s, run.slowdown = now, slowdown
            self._schedule_exit(job, run)
