"""The Slurm executor: topoq admits and places, Slurm runs each admitted gang as one job pinned
to exactly the placed nodes (``batch``), in a partition topoq owns. See docs/executors.md.

- **start** writes the gang's scripts under ``<work_dir>/<team>/<job>/<attempt>/`` (a directory
  every node must see, as Slurm's own output files) and submits them with ``sbatch``; each
  pod's output goes to ``pod-<rank>.log`` there, which ``topoq logs`` reads as it reads the
  local executor's.
- **poll** reads ``squeue --json`` of the partition: RUNNING → STARTED; an end → EXITED with
  the batch script's code (a pod that fails ends the step and the job: its code), or STOPPED
  after a ``stop``; NODE_FAIL → NODE_LOST; a job Slurm could not start on its nodes (pending
  for a reason that will not pass, e.g. a node down or drained) → START_FAILED, and it is
  cancelled.
- **stop** sends SIGTERM to the gang's pods (``scancel --signal=TERM``) and, after the grace
  period, cancels the job; STOPPED comes only when Slurm says the job ended, so no node is
  booked twice. **cancel** cancels and waits until Slurm says it ended.
- **inventory**: the partition's nodes from ``sinfo --json`` (CPUs, memory, ``gres/gpu``),
  their switches from topology.conf (``topology/tree``) — or their labels from a topoq cluster
  file (``topology_file``), which ``write_topology`` then keeps topology.conf in step with
  (``topology_conf``); DOWN or NOT_RESPONDING → failed, DRAIN → cordoned.
- **adopt**: after a restart, the jobs whose comment names a gang the store says holds capacity
  (``topoq:<attempt>:<job>``) are watched again; every other topoq job of the partition is
  cancelled.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topoq.domain.job import JobId
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import CPU, MEMORY, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.engine.ports import (
    ExecutorCapabilities,
    ExecutorEvent,
    ExecutorEventKind,
    ExecutorStartFailed,
    GangLaunch,
    LogRequest,
    UnknownJob,
)
from topoq.executors.environment import plan_pods, refuse_gpu_shares
from topoq.executors.local.layout import (
    attempt_dir,
    make_private_directories,
    write_private_text,
)
from topoq.executors.local.logfiles import MANIFEST, read_logs, write_manifest
from topoq.executors.slurm.batch import batch_plan, gpus_of, owner_of, started_marker
from topoq.executors.slurm.commands import SlurmCommandFailed, SlurmCommands, SlurmJob, SlurmNode
from topoq.executors.slurm.topology import TopologyFile, read_cluster_file, topology_conf_of
from topoq.executors.slurm.topology_conf import TopologyConfKeeper

SLURM_CAPABILITIES = ExecutorCapabilities(
    "slurm",
    runs_real_processes=True,
    can_fail_nodes=True,
    captures_logs=True,
    pods_outlive_executor=True,
    reports_inventory=True,
)
DEFAULT_POD_SCRIPT = Path(__file__).resolve().parent.parent / "default_pod.py"
ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "NODE_FAIL",
        "PREEMPTED",
        "SPECIAL_EXIT",
    }
)
NEVER_STARTS = ("ReqNodeNotAvail", "PartitionNodeLimit", "BadConstraints", "PartitionDown")
"""Pending reasons that say Slurm will not start the job on the nodes it was pinned to."""
CANCEL_PATIENCE_S = 30.0
RESUME_PATIENCE_S = 5.0
"""How long ``recover_node`` waits for a resumed node's slurmd to answer Slurm again."""
FAIL_NODE_REASON = "topoq-fail-node"
"""The reason ``fail_node`` gives Slurm, by which ``recover_node`` knows the DOWN is its own."""


@dataclass
class _Gang:
    job: JobId
    team: str
    attempt: int
    slurm_id: int
    directory: Path
    nodes: tuple[str, ...]
    pods: int
    started: bool = False
    stop_deadline: float | None = None
    """When the job is cancelled outright (after a ``stop``'s grace period)."""
    waiting_since: float = field(default=0.0)


class SlurmExecutor:
    """Runs placed gangs as Slurm jobs in ``partition`` of the cluster ``slurm_conf`` names
    (the environment's ``SLURM_CONF`` when None), their files under ``work_dir``."""

    def __init__(
        self,
        work_dir: Path | str,
        slurm_conf: Path | str | None = None,
        *,
        partition: str = "topoq",
        topology_conf: Path | str | None = None,
        topology_file: Path | str | None = None,
        write_topology: bool = False,
        start_deadline_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        python: str = sys.executable,
    ) -> None:
        self.capabilities = SLURM_CAPABILITIES
        self.work_dir = Path(work_dir)
        self.partition = partition
        self._slurm = SlurmCommands(slurm_conf)
        conf = Path(topology_conf) if topology_conf is not None else topology_conf_of(slurm_conf)
        self._topology = (
            TopologyFile(Path(topology_file), read_cluster_file)
            if topology_file is not None
            else TopologyFile(conf)
        )
        self._keeper = TopologyConfKeeper(conf, self._slurm) if write_topology else None
        self._start_deadline_s = start_deadline_s
        self._clock = clock
        self._python = python
        self._lock = threading.RLock()
        self._gangs: dict[JobId, _Gang] = {}
        self._stopping: dict[JobId, _Gang] = {}
        self._events: list[ExecutorEvent] = []
        self._addresses: dict[str, str] = {}
        self._reported: list[NodeSpec] | None = None
        self._failed_nodes: set[str] = set()
        self._teams: dict[JobId, str] = {}
        """The team of every job started or adopted here (whose logs may be read)."""

    # --- starting -------------------------------------------------------------------------
    def start(self, launch: GangLaunch) -> None:
        """Submit the gang as one Slurm job pinned to its nodes (a running attempt of the same
        job is cancelled first). STARTED comes through ``poll`` once Slurm runs it."""
        job, team = launch.job.id, str(launch.job.team)
        refuse_gpu_shares(launch.job.workload, self.capabilities)
        with self._lock:
            self.cancel(job)
            plans = plan_pods(launch.job.workload, launch.allocation)
            directory = attempt_dir(self.work_dir, team, job, launch.attempt)
            try:
                make_private_directories(directory, self.work_dir)
            except OSError as error:
                raise ExecutorStartFailed(f"cannot make {directory}: {error}") from None
            if not self._addresses:
                self._read_nodes()
            nodes = {plan.node for plan in plans}
            plan = batch_plan(
                launch,
                plans,
                self._commands(launch),
                directory=str(directory),
                partition=self.partition,
                addresses=self._addresses,
                node_gpus={node: gpus_of(launch, node) for node in nodes},
            )
            write_manifest(directory, plans)
            write_private_text(directory / "pods.sh", plan.pod_script)
            write_private_text(directory / "batch.sh", plan.batch_script)
            environment = {}
            if plan.host_file is not None:
                write_private_text(directory / "hosts", plan.host_file)
                environment["SLURM_HOSTFILE"] = str(directory / "hosts")
            try:
                slurm_id = self._slurm.submit(
                    plan.sbatch_options, directory / "batch.sh", environment
                )
            except SlurmCommandFailed as error:
                raise ExecutorStartFailed(
                    f"Slurm refused the gang: {error}",
                    hint=f"check partition {self.partition!r} and its nodes with sinfo",
                ) from None
            hosts = tuple(dict.fromkeys(p.node for p in plans))
            self._teams[job] = team
            self._gangs[job] = _Gang(
                job,
                team,
                launch.attempt,
                slurm_id,
                directory,
                hosts,
                len(plans),
                waiting_since=self._clock(),
            )

    def _commands(self, launch: GangLaunch) -> dict[str, tuple[str, ...]]:
        default = (self._python, str(DEFAULT_POD_SCRIPT))
        return {
            pod_set.name: tuple(launch.commands.get(pod_set.name) or ()) or default
            for pod_set in launch.job.workload.pod_sets
        }

    # --- stopping -------------------------------------------------------------------------
    def cancel(self, job: JobId) -> None:
        self.cancel_all([job])

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        """Cancel the jobs' Slurm jobs and return once Slurm says each ended; no event. The
        gangs are let go only then: a call that failed leaves them known, to be cancelled
        again by the next call."""
        with self._lock:
            gangs = [
                gang
                for job in jobs
                for gang in (self._gangs.get(job), self._stopping.get(job))
                if gang is not None
            ]
            ids = [gang.slurm_id for gang in gangs]
            if not ids:
                return
            self._slurm.cancel(ids)
            self._wait_ended(set(ids))
            for job in jobs:
                self._gangs.pop(job, None)
                self._stopping.pop(job, None)

    def _wait_ended(self, ids: set[int]) -> None:
        deadline = time.monotonic() + CANCEL_PATIENCE_S
        while time.monotonic() < deadline:
            running = {
                j.job_id for j in self._slurm.jobs(self.partition) if j.state not in ENDED_STATES
            }
            if not ids & running:
                return
            time.sleep(0.2)
        raise SlurmCommandFailed(
            f"Slurm jobs {sorted(ids)} did not end within {CANCEL_PATIENCE_S:.0f} s"
        )

    def stop(self, job: JobId, grace_s: float) -> None:
        """SIGTERM to every pod now, the job cancelled ``grace_s`` later; STOPPED once Slurm
        says it ended (at the next poll for a job that runs nothing here)."""
        with self._lock:
            gang = self._gangs.pop(job, None)
            if gang is None:
                if job not in self._stopping:
                    self._events.append(
                        ExecutorEvent(ExecutorEventKind.STOPPED, self._clock(), job=job)
                    )
                return
            gang.stop_deadline = self._clock() + grace_s
            self._stopping[job] = gang
            try:
                self._slurm.cancel([gang.slurm_id], signal="TERM")
            except SlurmCommandFailed:
                gang.stop_deadline = self._clock()  # cancelled outright at the next poll

    # --- observing ------------------------------------------------------------------------
    def poll(self) -> list[ExecutorEvent]:
        with self._lock:
            if self._gangs or self._stopping:
                self._observe()
            events, self._events = self._events, []
            return events

    def _observe(self) -> None:
        seen = {j.job_id: j for j in self._slurm.jobs(self.partition) if j.het_offset == 0}
        now = self._clock()
        for gang in list(self._stopping.values()):
            found = seen.get(gang.slurm_id)
            if found is None or found.state in ENDED_STATES:
                del self._stopping[gang.job]
                self._events.append(
                    ExecutorEvent(
                        ExecutorEventKind.STOPPED, now, job=gang.job, attempt=gang.attempt
                    )
                )
            elif gang.stop_deadline is not None and now >= gang.stop_deadline:
                gang.stop_deadline = None
                self._slurm.cancel([gang.slurm_id])
        for gang in list(self._gangs.values()):
            self._observe_gang(gang, seen.get(gang.slurm_id), now)

    def _observe_gang(self, gang: _Gang, found: SlurmJob | None, now: float) -> None:
        def event(kind: ExecutorEventKind, **details: object) -> None:
            self._events.append(
                ExecutorEvent(kind, now, job=gang.job, attempt=gang.attempt, **details)  # type: ignore[arg-type]
            )

        if found is None:
            del self._gangs[gang.job]
            event(
                ExecutorEventKind.EXITED,
                exit_code=1,
                message=f"Slurm no longer knows job {gang.slurm_id}",
            )
            return
        if found.state == "PENDING":
            if any(found.reason.startswith(r) for r in NEVER_STARTS) or (
                now - gang.waiting_since > self._start_deadline_s
            ):
                del self._gangs[gang.job]
                self._slurm.cancel([gang.slurm_id])
                event(
                    ExecutorEventKind.START_FAILED,
                    message=f"Slurm did not start job {gang.slurm_id} on "
                    f"{','.join(gang.nodes)}: {found.reason}",
                )
            return
        if not gang.started and self._all_pods_began(gang):
            gang.started = True
            event(ExecutorEventKind.STARTED)
        if found.state == "NODE_FAIL":
            del self._gangs[gang.job]
            down = next((n for n in gang.nodes if n in self._failed_nodes), gang.nodes[0])
            event(
                ExecutorEventKind.NODE_LOST,
                node=down,
                message=f"Slurm: NODE_FAIL ({found.reason})",
            )
        elif found.state in ENDED_STATES:
            del self._gangs[gang.job]
            code = self._exit_code(found)
            if gang.started or code == 0:
                event(ExecutorEventKind.EXITED, exit_code=code, message=f"Slurm: {found.state}")
            else:  # a pod's command could not run: the gang never started
                event(
                    ExecutorEventKind.EXITED,
                    exit_code=code or 127,
                    message=f"Slurm: {found.state} before every pod began",
                )

    def _exit_code(self, found: SlurmJob) -> int:
        """How an ended job ended: 0 when Slurm says COMPLETED, 143 (SIGTERM) when cancelled,
        else its batch script's code as ``scontrol show job`` says it."""
        if found.state == "COMPLETED":
            return 0
        if found.state == "CANCELLED":
            return 143
        try:
            return self._slurm.exit_code(found.job_id) or 1
        except SlurmCommandFailed:
            return 1  # it ended otherwise than well; Slurm no longer says how

    def _all_pods_began(self, gang: _Gang) -> bool:
        """Whether every pod of the gang found its command and began it (its marker)."""
        return all((gang.directory / started_marker(rank)).exists() for rank in range(gang.pods))

    def fail_node(self, node: str) -> None:
        """Set the node DOWN in Slurm: its gangs end (NODE_LOST through ``poll``). A node Slurm
        already holds DOWN (an admin's, or Slurm's own) keeps its state and reason."""
        with self._lock:
            self._failed_nodes.add(node)
            held = self._slurm.node(node)
            if held is None or held.state != "down":
                self._slurm.set_node_state(node, "DOWN", FAIL_NODE_REASON)
            self._events.append(
                ExecutorEvent(ExecutorEventKind.NODE_LOST, self._clock(), node=node)
            )

    def recover_node(self, node: str) -> None:
        """Resume the node in Slurm if ``fail_node`` set it DOWN (its reason says so), and wait
        (a few seconds at most) until Slurm hears from its slurmd again; a node an admin or
        Slurm itself holds back stays as it is: Slurm has the last word on it. Either way the
        next ``inventory_changes`` reports every node again, so that the cluster's state is
        what topoq merges next."""
        with self._lock:
            self._failed_nodes.discard(node)
            self._reported = None
            held = self._slurm.node(node)
            if held is None or held.reason != FAIL_NODE_REASON:
                return
            self._slurm.set_node_state(node, "RESUME")
            deadline = time.monotonic() + RESUME_PATIENCE_S
            while time.monotonic() < deadline and not self._responding(node):
                time.sleep(0.1)

    def _responding(self, node: str) -> bool:
        found = self._slurm.node(node)
        return found is not None and not _failed(found)

    def logs(self, job: JobId, pod: int | None = None, *, team: str | None = None) -> str:
        team = team if team is not None else self._teams.get(job)
        if team is None:
            raise UnknownJob(f"job {job} has no logs: it never started on this executor")
        return read_logs(self.work_dir, LogRequest(team, job, pod)).text

    def close(self) -> None:
        """Nothing to stop: Slurm jobs outlive the executor, and the next one adopts them."""

    # --- the cluster ----------------------------------------------------------------------
    def inventory_changes(self) -> list[NodeSpec] | None:
        """The partition's nodes when they changed since the last call."""
        with self._lock:
            nodes = self._read_nodes()
            if nodes == self._reported:
                return None
            self._reported = nodes
            return nodes

    def _read_nodes(self) -> list[NodeSpec]:
        every_node = self._slurm.nodes()
        slurm_nodes = {n.name: n for n in every_node if self.partition in n.partitions}
        self._addresses = {name: node.address for name, node in slurm_nodes.items()}
        cluster = self._topology.cluster()
        if self._keeper is not None:
            self._keeper.keep(cluster, frozenset(node.name for node in every_node))
        placed, _ = cluster
        return [
            _node_spec(spec, slurm_nodes[spec.name]) for spec in placed if spec.name in slurm_nodes
        ]

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        """Watch again the Slurm jobs of the gangs ``holding`` names (job → attempt); cancel
        every other topoq job of the partition that still runs. The jobs kept."""
        with self._lock:
            kept: set[JobId] = set()
            strays: list[int] = []
            for found in self._slurm.jobs(self.partition):
                owner = owner_of(found.comment)
                if owner is None or found.het_offset or found.state in ENDED_STATES:
                    continue
                job, team, attempt = owner
                self._teams.setdefault(job, team)
                if holding.get(job) == attempt and job not in self._gangs:
                    directory = attempt_dir(self.work_dir, team, job, attempt)
                    pods = _pods_of(directory)
                    self._gangs[job] = _Gang(
                        job,
                        team,
                        attempt,
                        found.job_id,
                        directory,
                        found.nodes,
                        pods,
                        waiting_since=self._clock(),
                    )
                    kept.add(job)
                else:
                    strays.append(found.job_id)
            if strays:
                self._slurm.cancel(strays)
            return kept


def _node_spec(placed: NodeSpec, node: SlurmNode) -> NodeSpec:
    allocatable = Resources(
        {
            CPU: node.cpus * 1000,
            MEMORY: node.memory_mb * 1024 * 1024,
            **({NVIDIA_GPU: node.gpus} if node.gpus else {}),
        }
    )
    cordoned = node.state.startswith("drain") or bool(
        {"DRAIN", "DRAINING", "DRAINED"} & set(node.flags)
    )
    return NodeSpec(
        placed.name,
        labels=placed.labels,
        allocatable=allocatable,
        unschedulable=cordoned,
        ready=not _failed(node),
    )


def _failed(node: SlurmNode) -> bool:
    """Whether Slurm holds the node DOWN or has not heard from its slurmd."""
    return node.state in ("down", "unknown", "future") or bool(
        {"DOWN", "NOT_RESPONDING"} & set(node.flags)
    )


def _pods_of(directory: Path) -> int:
    """How many pods an attempt has, from its manifest (``pods.json``)."""
    try:
        return len(json.loads((directory / MANIFEST).read_text()))
    except (OSError, ValueError):
        return 1
