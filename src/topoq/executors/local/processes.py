"""OS processes for pods: spawned in their own session, stopped with SIGTERM then SIGKILL
together with every process that belongs to them (``topoq.executors.local.process_table``), and
reaped without blocking."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from topoq.executors.local.layout import open_private
from topoq.executors.local.process_table import (
    ProcessEntry,
    children_of_this_process,
    marker_of,
    pod_processes,
    read_process_table,
    signal_processes,
)

SIGNAL_EXIT_BASE = 128
"""A pod killed by signal N reports exit code 128 + N, as shells and Kubernetes do."""


KEEPER_SCRIPT = Path(__file__).resolve().parent / "pod_keeper.py"
"""What each pod's own process runs: it runs the pod's command and writes its exit code down
(``topoq.executors.local.pod_keeper``), so that a pod outlives the executor that started it
and can be adopted by the next one."""
KILLED_EXIT_CODE = SIGNAL_EXIT_BASE + signal.SIGKILL
"""The exit code of a pod whose keeper left no code: it was killed (SIGKILL leaves none)."""


def spawn(
    argv: Sequence[str],
    *,
    environment: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    exit_file: Path,
    marker: tuple[str, str],
    python: str,
) -> subprocess.Popen[bytes]:
    """Start the pod's keeper as the leader of a new session, stdout and stderr into
    ``log_path`` (private, opened for appending so that a rotation's truncation leaves no
    hole); it runs ``argv`` with ``environment`` (handed over on its standard input) and
    writes the exit code to ``exit_file``. The keeper's own environment is the pod's
    ``marker`` variable alone. Raises as ``Popen`` would for ``argv`` itself: ValueError for
    a NUL or a malformed variable, FileNotFoundError or PermissionError for a command that
    cannot run."""
    runnable(argv, environment, cwd)
    log_descriptor = open_private(log_path, os.O_WRONLY | os.O_APPEND | os.O_TRUNC)
    with os.fdopen(log_descriptor, "wb") as log:
        keeper = subprocess.Popen(
            [python, "-I", "-S", str(KEEPER_SCRIPT), str(exit_file), "--", *argv],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict([marker]),
            start_new_session=True,
        )
    assert keeper.stdin is not None
    try:
        keeper.stdin.write(json.dumps(dict(environment)).encode())
    except BrokenPipeError:  # the keeper died at once: its exit says why
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            keeper.stdin.close()
    return keeper


def runnable(argv: Sequence[str], environment: Mapping[str, str], cwd: Path) -> None:
    """Raise what ``Popen(argv, env=environment, cwd=cwd)`` would before running anything."""
    if not argv:
        raise ValueError("an empty command")
    for name, value in environment.items():
        if "\0" in name or "\0" in value:
            raise ValueError(f"embedded null byte in the environment variable {name!r:.40}")
        if not name or "=" in name:
            raise ValueError(f"illegal environment variable name {name!r:.40}")
    if any("\0" in argument for argument in argv):
        raise ValueError("embedded null byte in the command")
    program = argv[0]
    if "/" in program:
        path = (cwd / program) if not program.startswith("/") else Path(program)
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    else:
        found = shutil.which(program, path=environment.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        path = Path(found)
    if path.is_dir() or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)


@dataclass(eq=False)
class AdoptedProcess:
    """The keeper of a pod that an earlier executor spawned (not a child of this process, so
    it cannot be waited for): alive while a process with its pid carries its marker; its
    exit code is what it wrote to its exit file."""

    pid: int
    marker: str
    exit_file: Path
    returncode: int | None = None

    def alive(self) -> bool:
        return marker_of(self.pid) == self.marker

    def poll(self) -> int | None:
        if self.returncode is None and not self.alive():
            self.returncode = recorded_exit_code(self.exit_file)
        return self.returncode

    def wait(self) -> int:
        while self.poll() is None:
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode


PodProcess = subprocess.Popen[bytes] | AdoptedProcess
"""A pod's own process (its keeper): spawned here, or adopted after a restart."""


def recorded_exit_code(exit_file: Path) -> int:
    """The code a keeper wrote; a keeper that wrote none was killed."""
    try:
        code = json.loads(exit_file.read_text(encoding="utf-8"))["exit_code"]
    except (OSError, ValueError, KeyError, TypeError):
        return KILLED_EXIT_CODE
    return code if isinstance(code, int) and not isinstance(code, bool) else KILLED_EXIT_CODE


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def exit_code(returncode: int) -> int:
    """Popen's return code as a shell reports it (a signal N becomes 128 + N)."""
    return SIGNAL_EXIT_BASE - returncode if returncode < 0 else returncode


def has_exited(process: PodProcess) -> bool:
    """Whether the process ended, without reaping it (its pid stays reserved until reaped)."""
    if process.returncode is not None:
        return True
    if isinstance(process, AdoptedProcess):
        return process.poll() is not None
    try:
        status = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return status is not None


def signal_group(process: PodProcess, signum: int) -> None:
    """Send ``signum`` to the pod's whole process group (the leader's pid is its id)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def reap(process: PodProcess) -> int:
    """The exit code of an ended pod. Kills what is left of its process group first, while the
    unreaped leader still reserves the group's id."""
    signal_group(process, signal.SIGKILL)
    return exit_code(process.wait())


@dataclass(eq=False)
class Stopping:
    """One attempt's pods being stopped (what ``Terminations.begin`` hands back)."""

    leaders: list[PodProcess]
    """The pods' own processes, until reaped."""
    marker_prefix: str
    kill_at: float
    """When what still runs gets SIGKILL (``time.monotonic``)."""
    on_gone: Callable[[], None] | None = None
    """Called (from ``advance``) once no process of the attempt is left."""
    told: bool = False
    """Whether its other processes were sent SIGTERM (at the first look, in ``advance``)."""


class Terminations:
    """Pods being stopped, each attempt's together: SIGTERM first, SIGKILL for what still runs
    after the grace period (the executor's own, or one given to ``begin``). An attempt is
    stopped once its leaders are reaped and no process belongs to it any more (its groups,
    sessions, descendants and marked processes); then its ``on_gone`` is called. Killed
    orphans that re-parented to this process are reaped too. ``advance`` never blocks;
    ``finish`` waits until the attempts named (or every one) are stopped."""

    def __init__(
        self,
        grace_s: float,
        executor_marker: str,
        running: Callable[[], Collection[int]] = frozenset,
    ) -> None:
        """``running`` gives the pids of the pods spawned and not being stopped (their
        ``Popen`` reaps them, so they are never adopted)."""
        self.grace_s = grace_s
        self._executor_marker = executor_marker
        self._running = running
        self._stopping: list[Stopping] = []
        self._adopted: set[int] = set()
        """Pod processes whose parent is this process though it did not spawn them."""

    def begin(
        self,
        leaders: Sequence[PodProcess],
        marker_prefix: str,
        *,
        grace_s: float | None = None,
        on_gone: Callable[[], None] | None = None,
    ) -> Stopping:
        """SIGTERM the attempt's pods now, SIGKILL after ``grace_s`` (default: the executor's)."""
        for leader in leaders:
            signal_group(leader, signal.SIGTERM)
        grace = self.grace_s if grace_s is None else grace_s
        entry = Stopping(list(leaders), marker_prefix, time.monotonic() + grace, on_gone)
        self._stopping.append(entry)
        return entry

    def hasten(self, entry: Stopping, grace_s: float) -> None:
        """Kill what is left of ``entry`` at most ``grace_s`` from now."""
        entry.kill_at = min(entry.kill_at, time.monotonic() + grace_s)

    def kill_now(self, leaders: Sequence[PodProcess], marker_prefix: str) -> None:
        """SIGKILL the attempt's processes and wait until they are gone."""
        for leader in leaders:
            signal_group(leader, signal.SIGKILL)
        entry = Stopping(list(leaders), marker_prefix, time.monotonic())
        self._stopping.append(entry)
        self.finish([entry])

    def adopt(self, pids: Collection[int], children: Collection[int] | None = None) -> None:
        """Reap these pod processes once they end, if they are children of this process
        (``children``, when the caller has just read them)."""
        known = children_of_this_process() if children is None else children
        self._adopted.update(pid for pid in pids if pid in known)

    def advance(self) -> None:
        """Reap what ended; SIGKILL what is past its grace period; adopt the orphans of
        pods that re-parented to this process. This process's children are read once."""
        children = children_of_this_process()
        self._adopt_orphans(children)
        if self._stopping:
            table = read_process_table()
            entries, self._stopping = self._stopping, []
            for entry in entries:
                if self._still_stopping(entry, table, children):
                    self._stopping.append(entry)
                elif entry.on_gone is not None:
                    entry.on_gone()
        self._reap_adopted()

    def finish(
        self, entries: Collection[Stopping] | None = None, poll_interval_s: float = 0.02
    ) -> None:
        """Block until the pods of ``entries`` (of every attempt being stopped, when None) are
        gone: at most their grace period and a bit."""
        while self._waiting_for(entries):
            self.advance()
            if self._waiting_for(entries):
                time.sleep(poll_interval_s)

    def _waiting_for(self, entries: Collection[Stopping] | None) -> bool:
        return any(entries is None or entry in entries for entry in self._stopping)

    def _still_stopping(
        self, entry: Stopping, table: Mapping[int, ProcessEntry], children: Collection[int]
    ) -> bool:
        entry.leaders = [leader for leader in entry.leaders if not _reaped(leader)]
        leaders = [leader.pid for leader in entry.leaders]
        found = pod_processes(table, leaders=leaders, marker_prefix=entry.marker_prefix)
        self.adopt(found - set(leaders), children)
        live = {pid for pid in found if not table[pid].zombie} - set(leaders)
        if not entry.leaders and not live:
            return False
        if not entry.told:
            signal_processes(live, signal.SIGTERM)
            entry.told = True
        if time.monotonic() >= entry.kill_at:
            for leader in entry.leaders:
                signal_group(leader, signal.SIGKILL)
            signal_processes(live, signal.SIGKILL)
        return True

    def _adopt_orphans(self, children: Collection[int]) -> None:
        spawned = set(self._running()) | {p.pid for e in self._stopping for p in e.leaders}
        for pid in set(children) - self._adopted - spawned:
            marker = marker_of(pid)
            if marker is not None and marker.startswith(self._executor_marker):
                self._adopted.add(pid)

    def _reap_adopted(self) -> None:
        for pid in list(self._adopted):
            try:
                ended, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                ended = pid
            if ended:
                self._adopted.discard(pid)


def _reaped(process: PodProcess) -> bool:
    if not has_exited(process):
        return False
    reap(process)
    return True
