"""What the engine needs from the outside, as protocols: a store that keeps jobs, policy,
nodes and the audit log durable, and an executor that runs placed gangs.

``store/`` and ``executors/`` implement these; the engine and the simulator depend only on
them (docs/architecture.md, rule 5)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from topoq.core.fair_share import TeamUsage
from topoq.domain.decisions import CycleResult
from topoq.domain.errors import InvalidInputError, TopoqError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import Allocation, JobId, JobPhase, JobSpec, JobView
from topoq.domain.limits import DEFAULT_LOG_READ_BYTES
from topoq.domain.node import NodeSpec
from topoq.domain.resources import Resources


class DuplicateJob(TopoqError):
    """A job with this id was submitted before (submission is idempotent by id)."""


class UnknownJob(TopoqError):
    """No job has this id."""


class ExecutorStartFailed(InvalidInputError):
    """An executor could not start a gang (e.g. an environment variable name with ``=``, a NUL
    in a command, a path it cannot make). Before raising, it stopped whatever it had started of
    the gang: no pod runs, no resource stays held and no attempt is recorded."""


class ConcurrentUpdate(TopoqError):
    """Another writer changed a job (or the policy) after this writer read it. Nothing of the
    transaction was written; read the current state again and redo the change."""


class StoreUnavailable(TopoqError):
    """The database cannot be reached, opened or written (the message names it, password
    hidden). Nothing of the transaction was written; the same work may succeed later."""


@dataclass(frozen=True)
class AuditEntry:
    at_s: float
    actor: str
    action: str
    target: str
    detail: Mapping[str, object] = field(default_factory=dict)


class Store(Protocol):
    """Durable state. Every write is one transaction and every read sees one consistent state
    of what it returns; a crash between calls loses nothing."""

    def add_job(
        self, spec: JobSpec, *, actor: str, now: float, audit: AuditEntry | None = None
    ) -> JobView:
        """Store a new pending job (its first history entry: submitted) and, in the same
        transaction, ``audit`` when given. Raises DuplicateJob (nothing written)."""

    def jobs(self, *, include_finished: bool = False) -> dict[JobId, JobView]:
        """Every job not yet finished (and, if asked, the finished ones too)."""

    def holding_jobs(self) -> dict[JobId, JobView]:
        """Every job that holds capacity (admitted or running), read without reading the
        queue."""

    def job(self, job_id: JobId) -> JobView:
        """One job, finished or not. Raises UnknownJob."""

    def phases_of(self, ids: Collection[JobId]) -> dict[JobId, JobPhase]:
        """The current phase of each of ``ids`` that is a stored job, finished or not (ids no
        job has are left out), read in one transaction: what dependencies are checked against
        at submission and resolved with in the cycle."""

    def save_jobs(
        self, changed: Sequence[JobView], *, now: float, decisions: CycleResult | None = None
    ) -> None:
        """Atomically: update each changed job's row, append its new history entries to the
        job events, and record the cycle's decisions (if given)."""

    def policy(self) -> ClusterPolicy | None:
        """The current policy version, if any."""

    def save_policy(self, policy: ClusterPolicy, *, actor: str, now: float) -> int:
        """Keep a new policy version (every version is kept); returns its number."""

    def nodes(self) -> list[NodeSpec]:
        """The node inventory with its current health and cordon state."""

    def save_nodes(self, nodes: Sequence[NodeSpec], *, actor: str, now: float) -> None:
        """Replace the inventory (nodes not listed are removed)."""

    def update_node(
        self,
        name: str,
        *,
        ready: bool | None = None,
        unschedulable: bool | None = None,
        now: float,
    ) -> NodeSpec | None:
        """Atomically set the fields given (health, cordon state) of one node and nothing
        else, so that concurrent changes of other nodes or other fields all stick; the node
        as it is now, or None when there is no node of that name."""

    def fair_share_usage(self) -> dict[TeamName, TeamUsage]:
        """Each team's decayed fair-share usage as last saved (empty before any)."""

    def save_fair_share_usage(self, usage: Mapping[TeamName, TeamUsage]) -> None:
        """Replace every team's decayed fair-share usage (teams not given are removed)."""

    def audit(self, entry: AuditEntry) -> None:
        """Append one entry to the append-only audit log."""

    def audit_log(
        self, *, limit: int = 100, since_s: float | None = None, actor: str | None = None
    ) -> list[AuditEntry]:
        """The newest entries first (at or after ``since_s``, by ``actor``, when given)."""


@dataclass(frozen=True)
class GangLaunch:
    """Everything an executor needs to start every pod of an admitted job."""

    job: JobSpec
    allocation: Allocation
    attempt: int
    """1 for the first start; counts restarts after failures, preemptions and node losses."""
    node_labels: Mapping[str, Mapping[str, str]]
    """The topology labels of each node the gang uses (for the pods' environment)."""
    commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The argv every pod of a pod set runs, by pod-set name. A pod set without one (or with an
    empty one) runs the executor's default workload."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Variables the user asked for, set in every pod; the executor's own launcher variables
    (``RANK``, ``WORLD_SIZE``, …) take precedence over them."""
    node_allocatable: Mapping[str, Resources] = field(default_factory=dict)
    """Everything each node of the gang has (not only the gang's share), e.g. so that the local
    executor can number a node's GPUs 0..n-1. Empty when unknown."""


class ExecutorEventKind(StrEnum):
    STARTED = "started"
    """Every pod of the gang is running."""
    EXITED = "exited"
    """The gang ended: all pods exited 0, or one failed (``exit_code`` is the first non-zero)."""
    NODE_LOST = "node_lost"
    """A node stopped: the gangs on it are gone."""
    START_FAILED = "start_failed"
    """The gang could not be started (``message`` says why); none of its pods runs. The
    controller makes this event itself when ``Executor.start`` raises."""
    STOPPED = "stopped"
    """Every pod of the gang is gone after a stop the controller asked for
    (``Executor.stop``), whether it exited on SIGTERM or was killed after the grace period."""


@dataclass(frozen=True)
class ExecutorEvent:
    kind: ExecutorEventKind
    at_s: float
    job: JobId | None = None
    attempt: int = 0
    exit_code: int | None = None
    node: str | None = None
    message: str = ""


@dataclass(frozen=True)
class ExecutorCapabilities:
    name: str
    runs_real_processes: bool
    can_fail_nodes: bool
    """Whether ``fail_node`` can stop a node's work on demand (for demos and tests)."""
    captures_logs: bool
    pods_outlive_executor: bool = False
    """Whether pods run on when the executor closes, to be adopted by the next one
    (``Executor.adopt``). Pods may also outlive a crash of the executor's process (the local
    executor's do): ``adopt`` takes those over whatever this says."""
    reports_inventory: bool = False
    """Whether the executor knows the cluster's nodes (``Executor.inventory_changes``), so
    that the server takes its inventory from there instead of a cluster file."""
    runs_containers: bool = False
    """Whether each pod runs in a container of its pod set's ``image`` (the executor's own
    image when the pod set names none). One that does not runs the command on its host and
    ignores the image; a submission naming one is accepted with a warning."""
    shares_gpus: bool = False
    """Whether a pod that asks for a share of a GPU runs confined to the device the scheduler
    packed it on (``PodPlan.gpu_devices``). One that cannot refuses such a gang at ``start``
    (``ExecutorStartFailed``) rather than run it on no GPU or on all of them."""


@dataclass(frozen=True)
class LogRequest:
    """A bounded read of a job's captured output, in its team's logs."""

    team: str
    job: JobId
    pod: int | None = None
    """One pod's rank; every pod's when None."""
    offset: int | None = None
    """Read forward from this stream offset of the pod's log (one pod only); the tail when
    None. An offset before the oldest byte kept, or past the end (not of this stream), reads
    from the oldest byte kept."""
    limit_bytes: int = DEFAULT_LOG_READ_BYTES
    """At most this many bytes in all (shared evenly between the pods when reading every pod)."""
    attempt: int | None = None
    """Which attempt's logs (from 1); the newest when None."""
    tail_lines: int | None = None
    """Only the last this many lines (of each pod), within the byte limit."""
    since_s: float | None = None
    """Only output written at or after this time (seconds since the epoch), from a line's
    start: a forward read from there, or its last ``tail_lines``. As precise as the
    executor's record of when output was written (about a second for the local executor)."""


@dataclass(frozen=True)
class PodLog:
    """What was read of one pod's log. Offsets are stream offsets: bytes since the pod's
    first, not moved by rotation."""

    rank: int
    pod_set: str
    node: str
    text: str
    offset: int
    """Where ``text`` starts."""
    next_offset: int
    """Where a forward read continues."""
    size_bytes: int
    """The stream's end at the read: every byte the pod wrote (kept or rotated away)."""
    truncated: bool
    """Whether bytes of the log (before or after ``text``) were left out."""


@dataclass(frozen=True)
class JobLog:
    job: JobId
    attempt: int
    pod: int | None
    pods: tuple[PodLog, ...]
    latest_attempt: int = 0
    """The newest attempt with logs when it was read (``attempt`` when it is the newest)."""

    @property
    def truncated(self) -> bool:
        return any(pod.truncated for pod in self.pods)

    @property
    def text(self) -> str:
        """One pod's text, or every pod's under a ``==> … <==`` header, in rank order."""
        if self.pod is not None:
            return "".join(pod.text for pod in self.pods)
        return "\n".join(
            f"==> job {self.job} attempt {self.attempt} pod {pod.rank} "
            f"({pod.pod_set} on {pod.node}) <==\n{pod.text}"
            for pod in self.pods
        )


LogReader = Callable[[LogRequest], JobLog]
"""Reads a team's job's captured output where the executor runs elsewhere, e.g. in the API's
process; raises UnknownJob when the executor never ran it for that team, InvalidInputError for
a pod it lacks."""


class Executor(Protocol):
    """Runs placed gangs. Outcomes come back through ``poll`` as events."""

    capabilities: ExecutorCapabilities

    def start(self, launch: GangLaunch) -> None:
        """Start every pod of the gang (returns at once; STARTED comes through ``poll``).
        When it raises, the controller treats the gang as not started (START_FAILED)."""

    def cancel(self, job: JobId) -> None:
        """Stop every pod of the job now (SIGTERM, then a kill after the executor's own short
        grace) and return once they are gone; no event follows. For user cancels, drains and
        requeues: nothing waits for the room."""

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        """``cancel`` for several jobs at once: every pod of each is stopped and the call
        returns once all are gone, so that their stops overlap instead of adding up. Raises
        as ``cancel`` does; a job cancelled before, or running nothing here, is ignored, so a
        call that failed can be made again."""

    def stop(self, job: JobId, grace_s: float) -> None:
        """Begin stopping every pod of the job for a preemption and return at once: SIGTERM
        now (a trainer may checkpoint), a kill for whatever still runs ``grace_s`` later.
        STOPPED comes through ``poll`` once every pod is gone (no EXITED for that attempt);
        for a job that runs nothing here, STOPPED comes at the next poll."""

    def poll(self) -> list[ExecutorEvent]:
        """Events since the last call, oldest first; never blocks."""

    def fail_node(self, node: str) -> None:
        """Stop all work on a node (NODE_LOST follows). Only with ``can_fail_nodes``."""

    def recover_node(self, node: str) -> None:
        """A node ``fail_node`` failed is healthy again: undo what ``fail_node`` did to the
        cluster (Slurm: the node it set DOWN is resumed). Only with ``can_fail_nodes``."""

    def logs(self, job: JobId, pod: int | None = None) -> str:
        """The captured output of the job's pods (one pod when ``pod`` is given)."""

    def close(self) -> None:
        """Stop everything it started (but pods that outlive the executor, when its
        capabilities say so)."""

    def inventory_changes(self) -> Sequence[NodeSpec] | None:
        """The cluster's nodes when they changed since the last call, as topoq may use them;
        None when unchanged, or for an executor that does not know the cluster's nodes."""

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        """After a restart, given the attempt of every job the store says holds capacity:
        keep the gangs of those attempts that still run here (their events follow as for
        gangs it started) and stop whatever else of its own it finds; the jobs kept."""


ClusterJob = Mapping[str, Any]
"""A job object of the cluster an executor runs on, as the cluster's API shows it (a
Kubernetes ``batch/v1`` Job)."""


@runtime_checkable
class ClusterJobSource(Protocol):
    """An executor whose cluster holds jobs of its own that topoq takes in (the Kubernetes
    executor: suspended Jobs that name a queue). The server gives each the same checks as a
    submission, then marks it taken or says on it why not."""

    def cluster_jobs(self) -> list[ClusterJob]:
        """The cluster's jobs neither taken nor refused as they are now, oldest first."""

    def took(self, job: ClusterJob, job_id: JobId) -> None:
        """Mark ``job`` as taken in as ``job_id``, on the cluster (never taken twice)."""

    def refuse(self, job: ClusterJob, reason: str, message: str) -> None:
        """Say on the cluster why ``job`` was not taken (``reason`` is one CamelCase word)."""

    def cluster_jobs_gone(self) -> list[JobId]:
        """The topoq jobs whose cluster job was deleted since the last call."""
