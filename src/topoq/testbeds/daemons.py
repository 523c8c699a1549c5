"""Background programs a test bed starts and stops by PID: each runs in a session of its own
with its output in ``DIR/NAME.log``, and ``DIR/processes.json`` records its PID with the
process's start time, so that stopping never signals a PID the system gave to another process
since."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topoq.domain.errors import InvalidInputError

RECORD_FILE = "processes.json"


class BedError(InvalidInputError):
    """A test bed that cannot be brought up or down; the message says what to do."""


class DaemonExited(BedError):
    """A daemon of the bed exited while it was being waited on (or was found gone)."""

    def __init__(self, message: str, *, hint: str | None = None, port_taken: bool = False):
        super().__init__(message, hint=hint)
        self.port_taken = port_taken
        """Its log says a port it was to listen on was taken (another choice of ports helps)."""


PORT_TAKEN = "address already in use"
LOG_TAIL_LINES = 5


@dataclass(frozen=True)
class Daemon:
    name: str
    pid: int
    started: int
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None when there is none or it
    has exited (a zombie counts as exited)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(daemon: Daemon) -> bool:
    return start_time(daemon.pid) == daemon.started


def recorded(directory: Path) -> dict[str, Daemon]:
    """The daemons started in ``directory`` (none when it records none)."""
    path = directory / RECORD_FILE
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise BedError(f"cannot read {path}: {error}", hint="remove it once nothing runs") from None
    return {name: Daemon(name, int(d["pid"]), int(d["started"])) for name, d in found.items()}


def _record(directory: Path, daemons: Mapping[str, Daemon]) -> None:
    path = directory / RECORD_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(
        json.dumps({d.name: {"pid": d.pid, "started": d.started} for d in daemons.values()})
    )
    temporary.replace(path)


def start_daemon(
    directory: Path,
    name: str,
    argv: Sequence[str],
    *,
    environment: Mapping[str, str] | None = None,
) -> Daemon:
    """Start ``argv`` in the background as ``name`` and record it before returning."""
    log = directory / f"{name}.log"
    with log.open("ab") as output:
        try:
            process = subprocess.Popen(  # our own programs, argv given
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=directory,
                env=dict(environment) if environment is not None else None,
                start_new_session=True,
            )
        except OSError as error:
            raise BedError(f"cannot start {name} ({argv[0]}): {error}") from None
    started = start_time(process.pid)
    daemon = Daemon(name, process.pid, started if started is not None else -1)
    _record(directory, {**recorded(directory), name: daemon})
    _KEPT.append(process)  # reaped by stop_daemons when this process started it
    return daemon


_KEPT: list[subprocess.Popen[bytes]] = []


def _reap() -> None:
    for process in list(_KEPT):
        if process.poll() is not None:
            _KEPT.remove(process)


def stop_daemons(
    directory: Path, groups: Sequence[Sequence[str]], *, patience_s: float = 30.0
) -> list[str]:
    """Stop the recorded daemons group by group (each group's members together, the next
    group once they are gone): SIGTERM, then SIGKILL after ``patience_s``. Those not named in
    any group go last. Returns the names stopped; the record is removed."""
    daemons = recorded(directory)
    named = {name for group in groups for name in group}
    order = [list(group) for group in groups] + [[n for n in daemons if n not in named]]
    stopped = []
    for group in order:
        members = [daemons[name] for name in group if name in daemons]
        alive = [daemon for daemon in members if is_alive(daemon)]
        for daemon in alive:
            _signal(daemon, signal.SIGTERM)
        deadline = time.monotonic() + patience_s
        while any(is_alive(d) for d in alive) and time.monotonic() < deadline:
            _reap()
            time.sleep(0.1)
        for daemon in alive:
            if is_alive(daemon):
                _signal(daemon, signal.SIGKILL)
        while any(is_alive(d) for d in alive):
            _reap()
            time.sleep(0.05)
        stopped += [daemon.name for daemon in alive]
    (directory / RECORD_FILE).unlink(missing_ok=True)
    _reap()
    return stopped


def kill_daemon(directory: Path, name: str) -> None:
    """SIGKILL one recorded daemon and wait until it is gone (it stays in the record)."""
    daemon = recorded(directory).get(name)
    if daemon is None or not is_alive(daemon):
        return
    _signal(daemon, signal.SIGKILL)
    while is_alive(daemon):
        _reap()
        time.sleep(0.05)


def _signal(daemon: Daemon, number: signal.Signals) -> None:
    try:
        os.killpg(daemon.pid, number)  # its session's group: the program and what it forked
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(daemon.pid, number)


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_FREE_PORT = 20000


def exited(daemon: Daemon, log: Path) -> DaemonExited:
    """The error for ``daemon`` having exited: the last lines of its log, and whether they say
    its port was taken."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    tail = [line.strip()[:300] for line in lines[-LOG_TAIL_LINES:]]
    shown = "; last lines of its log: " + " | ".join(tail) if tail else ""
    return DaemonExited(
        f"{daemon.name} (pid {daemon.pid}) exited{shown}",
        hint=f"see {log}",
        port_taken=any(PORT_TAKEN in line for line in tail),
    )


def wait_for_daemon(
    daemon: Daemon, ready: Callable[[], bool], deadline: float, what: str, log: Path
) -> None:
    """``wait_until`` ``ready()``, but a ``DaemonExited`` at once when ``daemon`` exits
    meanwhile, instead of waiting for the deadline on a program that is gone."""

    def ready_or_gone() -> bool:
        return not is_alive(daemon) or ready()

    wait_until(ready_or_gone, deadline, what, log)
    if not is_alive(daemon):
        raise exited(daemon, log)


def check_alive(directory: Path, names: Sequence[str]) -> None:
    """A ``DaemonExited`` for the first of the recorded daemons ``names`` that has exited."""
    daemons = recorded(directory)
    for name in names:
        daemon = daemons.get(name)
        if daemon is not None and not is_alive(daemon):
            raise exited(daemon, directory / f"{name}.log")


def free_listen_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nothing listens on (``free_listen_port``'s rule):
    each probe is held bound until all are chosen, so that no port is chosen twice."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            port = free_listen_port()
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                probe.close()
                continue
            held.append(probe)
        return [probe.getsockname()[1] for probe in held]
    finally:
        for probe in held:
            probe.close()


def free_listen_port(tries: int = 200) -> int:
    """A loopback port nothing listens on, below the kernel's ephemeral range: a server on an
    ephemeral port that restarts can find it taken by a client's outgoing connection (even
    by a client that, retrying to reach it, connected to itself)."""
    try:
        low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(tries):
        port = random.randrange(LOWEST_FREE_PORT, max(LOWEST_FREE_PORT + 1, low))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BedError(
        f"no free loopback port between {LOWEST_FREE_PORT} and {low}",
        hint="stop what listens there",
    )


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def check_ports_free(ports: Mapping[str, int], what: str) -> None:
    taken = [f"{port} ({name})" for name, port in ports.items() if port_in_use(port)]
    if taken:
        raise BedError(
            f"127.0.0.1 port {', '.join(taken)} is in use",
            hint=f"stop the other {what} first (topoq dev k8s down DIR)",
        )


def wait_until(ready: Callable[[], bool], deadline: float, what: str, log: Path | None) -> None:
    """Return once ``ready()`` is true (an exception counts as not yet, except a ``BedError``,
    which ``ready`` raises to give up), else a ``BedError`` at ``deadline``
    (``time.monotonic``) that names ``what`` it waited for and the log to read."""
    while True:
        try:
            if ready():
                return
        except BedError:
            raise
        except Exception:  # not ready yet: asked again until the deadline
            pass
        if time.monotonic() > deadline:
            where = f"; see {log}" if log is not None else ""
            raise BedError(f"timed out waiting for {what}{where}")
        time.sleep(0.2)


def read_bed_record(path: Path) -> dict[str, Any] | None:
    """A bed's record (``bed.json``), None when there is none."""
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise BedError(f"cannot read {path}: {error}") from None
    return found
