"""The API processes of ``topoq server``: the listening socket they share, and their
supervision by the controller process (docs/adr/0004-controller-process.md): one that dies
is replaced by a warmed spare (docs/adr/0005-access-and-api-lifetime.md)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from topoq.domain.errors import InvalidInputError

log = logging.getLogger("topoq.server")

LISTEN_BACKLOG = 2048
WORKER_STOP_TIMEOUT_S = 10.0
WORKER_RESTARTS = 5
"""API processes that may die within ``WORKER_FAST_DEATH_S`` of starting, in a row, before
the server gives up (something is wrong that restarting will not fix)."""
WORKER_FAST_DEATH_S = 5.0


SPARE_FD_OPTION = "--spare-fd"
"""How a spare learns the pipe on which it is told to serve."""
SPARE_START_DELAY_S = 2.0
"""After the server starts, the first spare waits this long, so as not to slow the serving
workers' own start."""
SPARE_RESTART_DELAY_S = 1.0
"""After a spare took over, the next one waits this long: the new worker has the backlog of
requests to answer first, and a start-up takes a core for a second or more."""
SERVING_NAME = "topoq-api"
SPARE_NAME = "topoq-api-spare"
"""What an API process calls itself (``/proc/<pid>/comm``, ``ps -o comm``) once warmed up."""
PR_SET_NAME = 15


@dataclass
class _ApiProcess:
    process: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)
    """When it was started, or, for a spare that took over, when it began to serve."""
    serve_fd: int | None = None
    """For a waiting spare: the write end of the pipe that tells it to serve."""

    def promote(self) -> None:
        """Tell the spare to serve (it does at once if warmed, else as soon as it is)."""
        if self.serve_fd is None:
            return
        with contextlib.suppress(OSError):  # it died meanwhile: supervise replaces it
            os.write(self.serve_fd, b"\1")
        self.close_pipe()
        self.started_at = time.monotonic()

    def close_pipe(self) -> None:
        if self.serve_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.serve_fd)
            self.serve_fd = None


@dataclass
class ApiWorkers:
    """Starts ``count`` API processes on one listening socket, keeps ``spares`` more started,
    warmed up and waiting, and replaces one that dies by a waiting spare: a write to a pipe,
    not a cold start (which took 3–17 s under load, benchmarks/README.md). The next spare then
    starts in the background, a second later."""

    command: list[str]
    pass_fds: tuple[int, ...]
    count: int
    environment: dict[str, str] | None = None
    """The API processes' environment (it carries the database URL, kept off argv)."""
    spares: int = 1
    running: list[_ApiProcess] = field(default_factory=list)
    waiting: list[_ApiProcess] = field(default_factory=list)
    fast_deaths: int = 0
    spare_due_at: float = 0.0

    def start(self) -> None:
        self.running = [self._spawn() for _ in range(self.count)]
        self.spare_due_at = time.monotonic() + SPARE_START_DELAY_S

    def supervise(self) -> None:
        """Replace dead API processes and keep the spares; raises SystemExit when they keep
        dying at once."""
        for index, api in enumerate(self.running):
            if self._ended(api, "an API process"):
                self.running[index] = self._replacement()
        for spare in list(self.waiting):
            if self._ended(spare, "a spare API process"):
                spare.close_pipe()
                self.waiting.remove(spare)
        if len(self.waiting) < self.spares and time.monotonic() >= self.spare_due_at:
            self.waiting.append(self._spawn_spare())

    def stop(self) -> None:
        everyone = [*self.running, *self.waiting]
        for api in everyone:
            api.close_pipe()
            if api.process.poll() is None:
                api.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT_S
        for api in everyone:
            try:
                api.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                api.process.kill()
                api.process.wait()

    def _ended(self, api: _ApiProcess, what: str) -> bool:
        code = api.process.poll()
        if code is None:
            return False
        lived = time.monotonic() - api.started_at
        self.fast_deaths = self.fast_deaths + 1 if lived < WORKER_FAST_DEATH_S else 0
        if self.fast_deaths > WORKER_RESTARTS:
            log.error("the API process keeps exiting (last code %s); stopping", code)
            raise SystemExit(1)
        log.error("%s exited with code %s; replacing it", what, code)
        return True

    def _replacement(self) -> _ApiProcess:
        if not self.waiting:
            return self._spawn()
        spare = self.waiting.pop(0)
        spare.promote()
        self.spare_due_at = time.monotonic() + SPARE_RESTART_DELAY_S
        return spare

    def _spawn_spare(self) -> _ApiProcess:
        read_fd, write_fd = os.pipe()
        try:
            api = self._spawn((SPARE_FD_OPTION, str(read_fd)), (read_fd,))
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        api.serve_fd = write_fd
        return api

    def _spawn(self, options: tuple[str, ...] = (), fds: tuple[int, ...] = ()) -> _ApiProcess:
        return _ApiProcess(
            subprocess.Popen(
                [*self.command, *options],
                pass_fds=(*self.pass_fds, *fds),
                stdin=subprocess.DEVNULL,
                env=self.environment,
            )
        )


def wait_until_told_to_serve(serve_fd: int) -> bool:
    """In a spare: block until the controller process says serve (True), or is gone
    (False: the pipe closed)."""
    try:
        told = os.read(serve_fd, 1)
    except OSError:
        told = b""
    with contextlib.suppress(OSError):
        os.close(serve_fd)
    return bool(told)


def name_process(name: str) -> None:
    """Set what ``ps -o comm`` and ``/proc/<pid>/comm`` show (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def listen(host: str, port: int) -> socket.socket:
    """The API's listening socket, bound here so that a taken port is reported at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise InvalidInputError(
            f"cannot listen on {host}:{port}: {error.strerror or error}",
            where="--port",
            hint="another server may be using it: stop it or choose another --port",
        ) from None
    listener.listen(LISTEN_BACKLOG)
    return listener
