"""The local executor: every pod of a placed gang is a real process on this machine, running
on a "virtual node" of the configured cluster.

Commands come from ``GangLaunch.commands`` (pod-set name → argv); a pod set without one runs
``topoq.executors.default_pod``. Each pod gets the variables of a distributed launcher (see
``topoq.executors.environment`` and docs/executors.md), its own GPU indices on its node, and a
private log file under ``<work_dir>/<team>/<job>/<attempt>/`` (see
``topoq.executors.local.layout``).
A gang lives and dies as a whole: the first pod to fail ends it and its other pods are stopped.
A gang that cannot start at all raises ``ExecutorStartFailed`` and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.ports import (
    ExecutorCapabilities,
    ExecutorEvent,
    ExecutorEventKind,
    ExecutorStartFailed,
    GangLaunch,
    LogRequest,
    UnknownJob,
)
from topoq.executors.environment import (
    GangContext,
    PodPlan,
    hosts_in_node_rank_order,
    launcher_environment,
    plan_pods,
)
from topoq.executors.local.attempts import RunningAttempt, RunningPod
from topoq.executors.local.devices import GpuIndexBook
from topoq.executors.local.layout import (
    PRIVATE_DIRECTORY_MODE,
    attempt_dir,
    attempt_marker,
    executor_id,
    make_private_directories,
    open_private,
    pod_exit_file,
    pod_log,
)
from topoq.executors.local.leftovers import (
    RecordedAttempt,
    RecordedPod,
    forget_pids,
    record_pids,
    recorded_attempts,
    stop_leftovers,
)
from topoq.executors.local.log_marks import MarkBook
from topoq.executors.local.log_rotation import tend_log
from topoq.executors.local.logfiles import read_logs, write_manifest
from topoq.executors.local.process_table import (
    MARKER_VARIABLE,
    hold_child_subreaper,
    release_child_subreaper,
)
from topoq.executors.local.processes import (
    AdoptedProcess,
    Stopping,
    Terminations,
    free_port,
    has_exited,
    reap,
    spawn,
)

LOCAL_CAPABILITIES = ExecutorCapabilities(
    name="local",
    runs_real_processes=True,
    can_fail_nodes=True,
    captures_logs=True,
    shares_gpus=True,
)
DEFAULT_STOP_GRACE_S = 3.0
"""How long a pod has between SIGTERM and SIGKILL when it is cancelled (``cancel``); a
preempted gang gets the grace period the controller gives ``stop``."""
DEFAULT_POD_SCRIPT = Path(__file__).resolve().parent.parent / "default_pod.py"
"""What a pod set without a command runs (``topoq.executors.default_pod``, by path, so the
pod's Python needs only its standard library)."""
DEFAULT_POD_LOG_LIMIT_BYTES = 64 << 20
"""What one pod's log keeps on disk at most (64 MiB, plus what it writes between two polls)."""
SMALLEST_POD_LOG_LIMIT_BYTES = 64 << 10
COMMAND_NOT_FOUND_EXIT_CODE = 127
COMMAND_NOT_RUNNABLE_EXIT_CODE = 126


def checked_log_limit(limit_bytes: int, *, where: str = "pod_log_limit_bytes") -> int:
    """``limit_bytes`` if a pod's output can be kept in it; ``where`` names the setting."""
    if limit_bytes < SMALLEST_POD_LOG_LIMIT_BYTES:
        raise InvalidInputError(
            f"a pod log limit of {limit_bytes:,} bytes is too small to keep a pod's output",
            where=where,
            hint=f"give at least {SMALLEST_POD_LOG_LIMIT_BYTES >> 10} KiB, e.g. 64Mi",
        )
    return limit_bytes


class LocalExecutor:
    """Runs gangs as process trees on this machine. Thread-safe; ``poll`` and ``stop`` never
    block, while ``cancel``, ``fail_node`` and ``close`` return once the pods' processes are
    gone (at most ``stop_grace_s`` after SIGTERM, when SIGKILL follows). A gang being stopped
    (``stop``) keeps its GPUs and its pid file until its last process is gone; then STOPPED."""

    def __init__(
        self,
        work_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        python: str = sys.executable,
        stop_grace_s: float = DEFAULT_STOP_GRACE_S,
        base_environment: Mapping[str, str] | None = None,
        pod_log_limit_bytes: int = DEFAULT_POD_LOG_LIMIT_BYTES,
        pods_outlive_executor: bool = False,
    ) -> None:
        """``pods_outlive_executor``: ``close`` leaves running pods running, for the next
        executor on ``work_dir`` to adopt (pods always outlive a crash of the process)."""
        self.pod_log_limit_bytes = checked_log_limit(pod_log_limit_bytes)
        self.capabilities = replace(LOCAL_CAPABILITIES, pods_outlive_executor=pods_outlive_executor)
        self._python = python
        self.work_dir = Path(work_dir)
        self._clock = clock
        self._default_command = (python, str(DEFAULT_POD_SCRIPT))
        self._base_environment = dict(os.environ if base_environment is None else base_environment)
        self._attempts: dict[JobId, RunningAttempt] = {}
        self._stopping: dict[JobId, tuple[RunningAttempt, Stopping]] = {}
        """Attempts being stopped for a preemption (``stop``), until their pods are gone."""
        self._teams: dict[JobId, str] = {}
        """The team of every job started here, so that ``logs`` finds its directory."""
        self._events: list[ExecutorEvent] = []
        self._gpus = GpuIndexBook()
        self._lock = threading.RLock()
        self.work_dir.mkdir(mode=PRIVATE_DIRECTORY_MODE, parents=True, exist_ok=True)
        self.work_dir.chmod(PRIVATE_DIRECTORY_MODE)
        self.id = executor_id(self.work_dir)
        """The first part of every pod's ``TOPOQ_POD`` marker, kept in ``work_dir``."""
        hold_child_subreaper()
        self._open = True
        self._terminations = Terminations(
            stop_grace_s, executor_marker=self.id + "/", running=self._running_pids
        )
        self.stopped_leftovers: list[int] = []
        """The pids of what an earlier executor left that this one stopped (once settled)."""
        self._settled = False
        """Whether what an earlier executor left was adopted or stopped (``_settle``)."""

    # --- the Executor protocol ----------------------------------------------------------

    def start(self, launch: GangLaunch) -> None:
        """Spawn every pod of the gang; a running attempt of the same job is cancelled first.
        STARTED (or EXITED 126/127 when a pod's command cannot run) comes through ``poll``.
        Raises ExecutorStartFailed when the gang cannot start at all (a variable name with
        ``=``, a NUL in the environment or the command, a directory it cannot make), after
        stopping the pods already spawned and giving their GPUs back."""
        job, team = launch.job.id, str(launch.job.team)
        with self._lock:
            self._settle()
            self.cancel(job)
            plans = plan_pods(launch.job.workload, launch.allocation)
            commands = self._commands(launch)
            directory = attempt_dir(self.work_dir, team, job, launch.attempt)
            marker = attempt_marker(self.id, team, job, launch.attempt)
            attempt = RunningAttempt(job, team, launch.attempt, directory, marker)
            self._teams[job] = team
            try:
                self._prepare(attempt, launch, plans)
                self._spawn_all(attempt, self._context(launch, plans), commands, launch.environment)
            except (OSError, ValueError, InvalidInputError) as error:
                self._undo_start(attempt)
                raise ExecutorStartFailed(
                    f"could not start the gang: {error}",
                    where=f"job {job} attempt {launch.attempt}",
                    hint="check the job's environment variables and commands",
                ) from error
            except BaseException:
                self._undo_start(attempt)
                raise

    def cancel(self, job: JobId) -> None:
        """Stop the job's pods and wait until they are gone (``stop_grace_s`` at most, also for
        a gang already being stopped); no event follows. A job that does not run here is
        ignored."""
        self.cancel_all([job])

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        """``cancel`` for several jobs: every pod is signalled first, then waited for once."""
        with self._lock:
            ending = []
            for job in jobs:
                attempt = self._attempts.get(job)
                if attempt is not None:
                    ending.append(self._end(attempt))
                if job in self._stopping:
                    _, entry = self._stopping[job]
                    self._terminations.hasten(entry, self._terminations.grace_s)
                    ending.append(entry)
            if ending:
                self._terminations.finish(ending)

    def stop(self, job: JobId, grace_s: float) -> None:
        """SIGTERM every pod of the job now and SIGKILL what still runs ``grace_s`` later,
        without waiting; STOPPED comes through ``poll`` once the last of its processes is gone
        (then its GPUs are free). A job that runs nothing here reports STOPPED at once; one
        already being stopped keeps its deadline."""
        with self._lock:
            attempt = self._attempts.pop(job, None)
            if attempt is None:
                if job not in self._stopping:
                    self._events.append(
                        ExecutorEvent(
                            ExecutorEventKind.STOPPED,
                            self._clock(),
                            job=job,
                            message="nothing of the job runs here",
                        )
                    )
                return
            entry = self._terminations.begin(
                attempt.running(),
                attempt.marker,
                grace_s=grace_s,
                on_gone=lambda: self._stopped(attempt),
            )
            self._stopping[job] = (attempt, entry)

    def poll(self) -> list[ExecutorEvent]:
        with self._lock:
            self._settle()
            self._terminations.advance()
            for attempt in list(self._attempts.values()):
                self._observe(attempt)
                self._tend_logs(attempt)
            events, self._events = self._events, []
            return events

    def recover_node(self, node: str) -> None:
        """Nothing to undo: a virtual node holds no state of its own."""

    def fail_node(self, node: str) -> None:
        """Kill every process on ``node`` and end every gang with a pod there. Events: one
        NODE_LOST for the node (``job=None``), then one per gang it ended; no EXITED."""
        with self._lock:
            lost = [attempt for attempt in self._attempts.values() if node in attempt.nodes]
            entries = [self._end(attempt) for attempt in lost]
            for attempt, entry in self._stopping.values():
                if node in attempt.nodes:
                    self._terminations.hasten(entry, 0.0)  # STOPPED follows for it
                    entries.append(entry)
            self._terminations.finish(entries)
            self._emit(ExecutorEventKind.NODE_LOST, None, node=node, message=f"node {node} failed")
            for attempt in lost:
                self._emit(
                    ExecutorEventKind.NODE_LOST,
                    attempt,
                    node=node,
                    message=f"node {node} failed; every pod of the gang was stopped",
                )

    def logs(self, job: JobId, pod: int | None = None, *, team: str | None = None) -> str:
        """The newest attempt's output: one pod's, or every pod's under a header each. The
        job's team is the one it was started for here, unless ``team`` says."""
        team = team if team is not None else self._teams.get(job)
        if team is None:
            raise UnknownJob(f"job {job} has no logs: it never started on this executor")
        return read_logs(self.work_dir, LogRequest(team, job, pod)).text

    def inventory_changes(self) -> None:
        """None: the local executor runs on the configured cluster's virtual nodes."""
        return None

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        """After a restart, given the attempt of every job the store says holds capacity: keep
        the gangs of those attempts that an earlier executor on this work directory started
        and whose every pod still runs or ended with an exit code its keeper wrote (a pod that
        ended while no executor watched is reported by the next ``poll``, as if it had just
        ended); STARTED follows for each. Every other process an earlier executor left is
        stopped. Called before anything else, or not at all (then the first ``start`` or
        ``poll`` stops everything left)."""
        with self._lock:
            return self._settle(holding)

    def close(self) -> None:
        with self._lock:
            if self.capabilities.pods_outlive_executor:
                self._attempts.clear()  # left running, recorded, for the next executor
            for attempt in list(self._attempts.values()):
                self._end(attempt)
            for _, entry in self._stopping.values():
                self._terminations.hasten(entry, self._terminations.grace_s)
            self._terminations.finish()
            if self._open:
                self._open = False
                release_child_subreaper()

    # --- local extras -------------------------------------------------------------------

    def pids(self, job: JobId) -> dict[int, int]:
        """The process id of each running pod of the job, by rank (empty when it does not run)."""
        with self._lock:
            attempt = self._attempts.get(job)
            pods = attempt.pods if attempt is not None else []
            return {
                p.plan.rank: p.process.pid
                for p in pods
                if p.process is not None and p.exit_code is None
            }

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- after a restart ----------------------------------------------------------------

    def _settle(self, holding: Mapping[JobId, int] | None = None) -> set[JobId]:
        """Once: adopt the attempts of ``holding`` an earlier executor left whole, and stop
        everything else it left. The jobs adopted."""
        if self._settled:
            return set()
        self._settled = True
        adopted = [
            attempt
            for recorded in recorded_attempts(self.work_dir)
            if holding is not None
            and holding.get(JobId(recorded.job)) == recorded.number
            and (attempt := self._adoptable(recorded)) is not None
        ]
        directories = [attempt.directory for attempt in adopted]
        self.stopped_leftovers = stop_leftovers(self.work_dir, self.id + "/", sparing=directories)
        self._terminations.adopt(self.stopped_leftovers)
        for attempt in adopted:
            self._attempts[attempt.job] = attempt
            self._teams[attempt.job] = attempt.team
            for pod in attempt.pods:
                if not pod.plan.gpu_milli:
                    self._gpus.reserve(pod.plan.node, pod.gpu_indices)
            message = f"{len(attempt.pods)} pods adopted after a restart of the control plane"
            self._emit(ExecutorEventKind.STARTED, attempt, message=message)
        return {attempt.job for attempt in adopted}

    def _adoptable(self, recorded: RecordedAttempt) -> RunningAttempt | None:
        """The attempt as this executor runs it, if every pod's keeper is still its own (same
        pid, same marker) or ended with a written exit code; None when a pod is lost."""
        job = JobId(recorded.job)
        marker = attempt_marker(self.id, recorded.team, job, recorded.number)
        if recorded.directory != attempt_dir(self.work_dir, recorded.team, job, recorded.number):
            return None
        attempt = RunningAttempt(job, recorded.team, recorded.number, recorded.directory, marker)
        for pod in recorded.pods:
            exit_file = pod_exit_file(recorded.directory, pod.plan.rank)
            process = AdoptedProcess(pod.pid, f"{marker}{pod.plan.rank}", exit_file)
            if not process.alive() and not exit_file.exists():
                return None  # killed while nobody watched: the gang lost a pod
            attempt.pods.append(RunningPod(pod.plan, pod.gpu_indices, process))
        return attempt

    # --- starting -----------------------------------------------------------------------

    def _commands(self, launch: GangLaunch) -> dict[str, tuple[str, ...]]:
        names = [pod_set.name for pod_set in launch.job.workload.pod_sets]
        unknown = sorted(set(launch.commands) - set(names))
        if unknown:
            raise InvalidInputError(
                f"commands name pod sets the job does not have: {', '.join(unknown)}",
                where=f"job {launch.job.id}",
                hint=f"its pod sets are {', '.join(names)}",
            )
        return {name: tuple(launch.commands.get(name) or self._default_command) for name in names}

    def _prepare(
        self, attempt: RunningAttempt, launch: GangLaunch, plans: Sequence[PodPlan]
    ) -> None:
        """The attempt's private directory and manifest, and its pods with their GPUs."""
        make_private_directories(attempt.directory, self.work_dir)
        write_manifest(attempt.directory, plans)
        for node, allocatable in launch.node_allocatable.items():
            self._gpus.declare(node, allocatable.amount(NVIDIA_GPU))
        attempt.pods = self._take_gpus(plans)

    def _context(self, launch: GangLaunch, plans: Sequence[PodPlan]) -> GangContext:
        return GangContext(
            job=launch.job.id,
            attempt=launch.attempt,
            world_size=len(plans),
            hosts=hosts_in_node_rank_order(plans),
            master_port=free_port(),
            node_labels=launch.node_labels,
        )

    def _undo_start(self, attempt: RunningAttempt) -> None:
        """Leave nothing of an attempt that could not start: its spawned pods are killed at
        once, its GPUs given back, its record and directory removed."""
        if self._attempts.get(attempt.job) is attempt:
            del self._attempts[attempt.job]
        self._release_gpus(attempt.pods)
        self._terminations.kill_now(attempt.running(), attempt.marker)
        shutil.rmtree(attempt.directory, ignore_errors=True)

    def _take_gpus(self, plans: Sequence[PodPlan]) -> list[RunningPod]:
        pods: list[RunningPod] = []
        try:
            for plan in plans:
                pods.append(RunningPod(plan, self._devices_of(plan)))
        except InvalidInputError:
            self._release_gpus(pods)
            raise
        return pods

    def _devices_of(self, plan: PodPlan) -> tuple[int, ...]:
        """The GPU indices the pod sees: those the scheduler packed it on where it kept the
        node's devices (a whole device is then marked taken; a shared one is not, as other
        pods' shares of it run beside), else the lowest free ones of the node."""
        if plan.gpu_devices is None:
            return self._gpus.take(plan.node, plan.gpus)
        if not plan.gpu_milli:
            self._gpus.reserve(plan.node, plan.gpu_devices)
        return plan.gpu_devices

    def _spawn_all(
        self,
        attempt: RunningAttempt,
        context: GangContext,
        commands: Mapping[str, tuple[str, ...]],
        user_environment: Mapping[str, str],
    ) -> None:
        base = self._base_environment | {"PYTHONUNBUFFERED": "1"} | dict(user_environment)
        self._attempts[attempt.job] = attempt
        for pod in attempt.pods:
            environment = base | launcher_environment(context, pod.plan, pod.gpu_indices)
            environment[MARKER_VARIABLE] = f"{attempt.marker}{pod.plan.rank}"
            try:
                pod.process = spawn(
                    commands[pod.plan.pod_set],
                    environment=environment,
                    cwd=attempt.directory,
                    log_path=pod_log(attempt.directory, pod.plan.rank),
                    exit_file=pod_exit_file(attempt.directory, pod.plan.rank),
                    marker=(MARKER_VARIABLE, environment[MARKER_VARIABLE]),
                    python=self._python,
                )
            except OSError as error:
                self._fail_to_start(attempt, pod, error)
                return
        recorded = [
            RecordedPod(p.plan, p.gpu_indices, p.process.pid) for p in attempt.pods if p.process
        ]
        record_pids(
            attempt.directory,
            attempt.job,
            [pod.pid for pod in recorded],
            team=attempt.team,
            pods=recorded,
        )
        hosts = ", ".join(context.hosts)
        message = f"{len(attempt.pods)} pods on {hosts}, rendezvous port {context.master_port}"
        self._emit(ExecutorEventKind.STARTED, attempt, message=message)

    def _fail_to_start(self, attempt: RunningAttempt, pod: RunningPod, error: OSError) -> None:
        self._terminations.finish([self._end(attempt)])
        code = (
            COMMAND_NOT_FOUND_EXIT_CODE
            if isinstance(error, FileNotFoundError)
            else COMMAND_NOT_RUNNABLE_EXIT_CODE
        )
        message = f"{pod.describe()} could not start: {error}"
        with contextlib.suppress(OSError):  # the message also goes out with the event
            log = open_private(pod_log(attempt.directory, pod.plan.rank), os.O_WRONLY | os.O_APPEND)
            with os.fdopen(log, "w", encoding="utf-8") as file:
                file.write(message + "\n")
        self._emit(ExecutorEventKind.EXITED, attempt, exit_code=code, message=message)

    # --- observing and ending -----------------------------------------------------------

    def _observe(self, attempt: RunningAttempt) -> None:
        """Reap the attempt's exited pods; end the gang on the first failure or when all
        pods succeeded."""
        for pod in attempt.pods:
            if pod.exit_code is not None or pod.process is None or not has_exited(pod.process):
                continue
            pod.exit_code = reap(pod.process)
            if pod.exit_code != 0:
                self._end(attempt)
                message = f"{pod.describe()} exited with {pod.exit_code}; the gang was stopped"
                self._emit(
                    ExecutorEventKind.EXITED, attempt, exit_code=pod.exit_code, message=message
                )
                return
        if all(pod.exit_code == 0 for pod in attempt.pods):
            self._end(attempt)
            message = f"all {len(attempt.pods)} pods exited 0"
            self._emit(ExecutorEventKind.EXITED, attempt, exit_code=0, message=message)

    def _tend_logs(self, attempt: RunningAttempt) -> None:
        """Rotate the pods' logs past the limit and mark when their output was written (an
        exited pod's last output too: the attempt is tended once more after it ends)."""
        now = self._clock()
        for pod in attempt.pods:
            if pod.log_book is None:
                pod.log_book = MarkBook(attempt.directory, pod.plan.rank)
            with contextlib.suppress(OSError):  # a full disk must not stop the polls
                tend_log(pod.log_book, self.pod_log_limit_bytes, now)

    def _end(self, attempt: RunningAttempt) -> Stopping:
        """Forget the attempt, give back its GPUs and start stopping its running pods."""
        self._attempts.pop(attempt.job, None)
        forget_pids(attempt.directory)
        self._release_gpus(attempt.pods)
        return self._terminations.begin(attempt.running(), attempt.marker)

    def _stopped(self, attempt: RunningAttempt) -> None:
        """The last process of an attempt being stopped is gone: its GPUs and pid file go,
        and STOPPED is reported."""
        if self._stopping.get(attempt.job, (None,))[0] is attempt:
            del self._stopping[attempt.job]
        forget_pids(attempt.directory)
        self._release_gpus(attempt.pods)
        message = f"all {len(attempt.pods)} pods stopped"
        self._emit(ExecutorEventKind.STOPPED, attempt, message=message)

    def _running_pids(self) -> list[int]:
        return [process.pid for attempt in self._attempts.values() for process in attempt.running()]

    def _release_gpus(self, pods: Sequence[RunningPod]) -> None:
        for pod in pods:
            if not pod.plan.gpu_milli:  # a share's device was never marked taken
                self._gpus.release(pod.plan.node, pod.gpu_indices)

    def _emit(
        self,
        kind: ExecutorEventKind,
        attempt: RunningAttempt | None,
        *,
        exit_code: int | None = None,
        node: str | None = None,
        message: str = "",
    ) -> None:
        self._events.append(
            ExecutorEvent(
                kind=kind,
                at_s=self._clock(),
                job=attempt.job if attempt is not None else None,
                attempt=attempt.number if attempt is not None else 0,
                exit_code=exit_code,
                node=node,
                message=message,
            )
        )
