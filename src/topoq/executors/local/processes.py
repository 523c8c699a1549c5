"""OS processes for pods: spawned in their own session, stopped with SIGTERM then SIGKILL
together with every process that belongs to them (``topoq.executors.local.process_table``), and
reaped without blocking."""

from __future__ import annotations

import contextlib
import os
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


def spawn(
    argv: Sequence[str], *, environment: Mapping[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session, stdout and stderr into ``log_path``
    (private, opened for appending so that a rotation's truncation leaves no hole)."""
    log_descriptor = open_private(log_path, os.O_WRONLY | os.O_APPEND | os.O_TRUNC)
    with os.fdopen(log_descriptor, "wb") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(environment),
            start_new_session=True,
        )


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def exit_code(returncode: int) -> int:
    """Popen's return code as a shell reports it (a signal N becomes 128 + N)."""
    return SIGNAL_EXIT_BASE - returncode if returncode < 0 else returncode


def has_exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the process ended, without reaping it (its pid stays reserved until reaped)."""
    if process.returncode is not None:
        return True
    try:
        status = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return status is not None


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the pod's whole process group (the leader's pid is its id)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def reap(process: subprocess.Popen[bytes]) -> int:
    """The exit code of an ended pod. Kills what is left of its process group first, while the
    unreaped leader still reserves the group's id."""
    signal_group(process, signal.SIGKILL)
    return exit_code(process.wait())


@dataclass(eq=False)
class Stopping:
    """One attempt's pods being stopped (what ``Terminations.begin`` hands back)."""

    leaders: list[subprocess.Popen[bytes]]
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
        leaders: Sequence[subprocess.Popen[bytes]],
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

    def kill_now(self, leaders: Sequence[subprocess.Popen[bytes]], marker_prefix: str) -> None:
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


def _reaped(process: subprocess.Popen[bytes]) -> bool:
    if not has_exited(process):
        return False
    reap(process)
    return True
