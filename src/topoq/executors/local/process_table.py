"""Which processes on this machine belong to pods (Linux ``/proc``).

A pod's processes are found three ways, so that leaving the pod's session is not enough to
escape: every process in the process group or session of a pod's leader (while the unreaped
leader reserves their ids), every descendant of those, and every process whose environment
carries the pod's marker ``TOPOQ_POD=<executor>/<team>/<job>/<attempt>/<rank>`` (inherited
through any number of forks, wherever the process moved its working directory). The executor's
process is also made a child subreaper, so that orphans re-parent to it instead of to init and
it can reap the ones it killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

MARKER_VARIABLE = "TOPOQ_POD"
"""Set in every pod's environment; its value names the executor, team, job, attempt and rank."""
_PROC = Path("/proc")
_MARKER_PREFIX = MARKER_VARIABLE.encode() + b"="
_PR_SET_CHILD_SUBREAPER = 36


class _SubreaperHolds:
    """How many holders need this process to be a child subreaper."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


_SUBREAPER_HOLDS = _SubreaperHolds()


@dataclass(frozen=True)
class ProcessEntry:
    pid: int
    parent: int
    group: int
    session: int
    zombie: bool
    marker: str | None
    """The ``TOPOQ_POD`` value of its environment (None without one, or for a zombie)."""


def read_process_table() -> dict[int, ProcessEntry]:
    """Every process this user can see, by pid (empty without ``/proc``)."""
    table: dict[int, ProcessEntry] = {}
    for entry in _PROC.glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            table[int(entry.name)] = _read_entry(entry)
    return table


def _read_entry(directory: Path) -> ProcessEntry:
    fields = (directory / "stat").read_text().rsplit(")", 1)[1].split()
    state, parent, group, session = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    return ProcessEntry(
        pid=int(directory.name),
        parent=parent,
        group=group,
        session=session,
        zombie=state in {"Z", "X"},
        marker=marker_of(int(directory.name)),
    )


def marker_of(pid: int) -> str | None:
    """The ``TOPOQ_POD`` value in the process's environment, if it has one."""
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for variable in environ.split(b"\0"):
        if variable.startswith(_MARKER_PREFIX):
            return variable[len(_MARKER_PREFIX) :].decode("utf-8", errors="replace")
    return None


def pod_processes(
    table: Mapping[int, ProcessEntry],
    *,
    leaders: Collection[int],
    marker_prefix: str | tuple[str, ...],
) -> set[int]:
    """The pids of ``table`` that belong to pods: the ``leaders`` (unreaped pod processes),
    the members of their process groups and sessions, every process whose marker starts with
    ``marker_prefix`` (or one of them), and every descendant of all those. Never this
    process."""
    seeds = {pid for pid in leaders if pid in table}
    for entry in table.values():
        in_leaders_group = entry.group in leaders or entry.session in leaders
        marked = entry.marker is not None and entry.marker.startswith(marker_prefix)
        if in_leaders_group or marked:
            seeds.add(entry.pid)
    children: dict[int, list[int]] = {}
    for entry in table.values():
        children.setdefault(entry.parent, []).append(entry.pid)
    this_process = os.getpid()  # never a pod, nor are its other children through it
    found, waiting = set(), [pid for pid in seeds if pid != this_process]
    while waiting:
        pid = waiting.pop()
        if pid not in found and pid != this_process:
            found.add(pid)
            waiting.extend(children.get(pid, ()))
    return found


def signal_processes(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def kill_until_gone(
    marker_prefix: str,
    leaders: Collection[int] = (),
    rounds: int = 50,
    *,
    sparing: Collection[str] = (),
) -> set[int]:
    """SIGKILL every pod process of ``marker_prefix`` and ``leaders`` again and again until a
    fresh look finds none alive (a process may fork while it is being killed) — but those of
    the pods whose markers start with one of ``sparing``, and the processes of their groups,
    sessions and descendants. Returns the pids killed."""
    killed: set[int] = set()
    prefixes = tuple(sparing)
    for _ in range(rounds):
        table = read_process_table()
        spared: set[int] = set()
        if prefixes:  # the spared pods' keepers lead their groups: those go with them
            kept = [e.pid for e in table.values() if e.marker and e.marker.startswith(prefixes)]
            spared = pod_processes(table, leaders=kept, marker_prefix=prefixes)
        live = {
            pid
            for pid in pod_processes(table, leaders=leaders, marker_prefix=marker_prefix)
            if not table[pid].zombie and pid not in spared
        }
        if not live:
            break
        signal_processes(live, signal.SIGKILL)
        killed |= live
    return killed


def children_of_this_process() -> set[int]:
    """The pids whose parent is this process (any of its threads)."""
    found: set[int] = set()
    for task in (_PROC / "self" / "task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def hold_child_subreaper() -> None:
    """Make this process a child subreaper (Linux) while at least one holder needs it, so that
    pods' orphans re-parent to it rather than to init."""
    with _SUBREAPER_HOLDS.lock:
        if _SUBREAPER_HOLDS.count == 0:
            _set_child_subreaper(True)
        _SUBREAPER_HOLDS.count += 1


def release_child_subreaper() -> None:
    with _SUBREAPER_HOLDS.lock:
        _SUBREAPER_HOLDS.count = max(0, _SUBREAPER_HOLDS.count - 1)
        if _SUBREAPER_HOLDS.count == 0:
            _set_child_subreaper(False)


def _set_child_subreaper(on: bool) -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
