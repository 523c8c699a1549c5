"""The API processes of ``topoq server``: the listening socket they share, and their
supervision by the controller process (docs/adr/0004-controller-process.md)."""

from __future__ import annotations

import logging
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


@dataclass
class _ApiProcess:
    process: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)


@dataclass
class ApiWorkers:
    """Starts ``count`` API processes on one listening socket and restarts one that dies."""

    command: list[str]
    pass_fds: tuple[int, ...]
    count: int
    environment: dict[str, str] | None = None
    """The API processes' environment (it carries the database URL, kept off argv)."""
    running: list[_ApiProcess] = field(default_factory=list)
    fast_deaths: int = 0

    def start(self) -> None:
        self.running = [self._spawn() for _ in range(self.count)]

    def supervise(self) -> None:
        """Restart dead API processes; raises SystemExit when they keep dying at once."""
        for index, api in enumerate(self.running):
            code = api.process.poll()
            if code is None:
                continue
            lived = time.monotonic() - api.started_at
            self.fast_deaths = self.fast_deaths + 1 if lived < WORKER_FAST_DEATH_S else 0
            if self.fast_deaths > WORKER_RESTARTS:
                log.error("the API process keeps exiting (last code %s); stopping", code)
                raise SystemExit(1)
            log.error("an API process exited with code %s; starting another", code)
            self.running[index] = self._spawn()

    def stop(self) -> None:
        for api in self.running:
            if api.process.poll() is None:
                api.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT_S
        for api in self.running:
            try:
                api.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                api.process.kill()
                api.process.wait()

    def _spawn(self) -> _ApiProcess:
        return _ApiProcess(
            subprocess.Popen(
                self.command,
                pass_fds=self.pass_fds,
                stdin=subprocess.DEVNULL,
                env=self.environment,
            )
        )


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
