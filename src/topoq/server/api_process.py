"""One API process of ``topoq server``: uvicorn on the controller process's listening socket,
reading and writing the store and waking the controller through a pipe (ADR 0004)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
from typing import Any

import httpx
import uvicorn

from topoq.api.access_log import ACCESS_LOGGER
from topoq.api.app import create_app
from topoq.api.errors import ERRORS_LOGGER
from topoq.api.service import Service
from topoq.api_workers import (
    LISTEN_BACKLOG,
    SERVING_NAME,
    SPARE_NAME,
    name_process,
    wait_until_told_to_serve,
)
from topoq.discovery.sources import load_cluster
from topoq.engine.metrics import MetricsFile
from topoq.executors.registry import log_reader, plugin
from topoq.server.build import METRICS_FILE, cluster_topology, executor_options
from topoq.server.loop import settle_garbage_collector, wake_controller
from topoq.server.settings import ServerSettings
from topoq.server_environment import keep_files_private
from topoq.server_log import LogSettings, configure_logging, muted
from topoq.store.database import connect, resolve_url
from topoq.store.sql_store import SqlStore

PR_SET_PDEATHSIG = 1


def serve_api(
    settings: ServerSettings,
    *,
    listen_fd: int,
    wake_fd: int,
    parent_pid: int,
    spare_fd: int | None = None,
) -> None:
    """One API process: uvicorn on the controller process's listening socket. A spare
    (``spare_fd``) gets everything ready, then waits on that pipe until told to serve."""
    _die_with_parent(parent_pid)
    keep_files_private()
    log_settings = LogSettings(settings.log_format, settings.log_level, settings.access_log)
    configure_logging(log_settings)
    os.set_blocking(wake_fd, False)
    data_dir = settings.data_dir
    store = SqlStore(connect(resolve_url(settings.database_url, data_dir)))  # migrated already
    found = plugin(settings.executor)
    service = Service(
        store,
        cluster_topology(settings, load_cluster(settings.cluster_file)),
        logs=log_reader(settings.executor, **executor_options(settings)),
        wake=lambda: wake_controller(wake_fd),
        metrics=MetricsFile(data_dir / METRICS_FILE),
        inventory_from_executor=found.capabilities.reports_inventory,
        executor=found.capabilities,
    )
    listener = socket.socket(fileno=listen_fd)
    app = create_app(service, access_log=settings.access_log)
    warm_up(app, store)
    config = uvicorn.Config(
        app, log_config=None, log_level=None, access_log=False, backlog=LISTEN_BACKLOG
    )  # the process's logging (``configure_logging``) stays as it is
    server = uvicorn.Server(config)
    server.config.load()  # uvicorn's protocol and event-loop modules, imported now
    server.config.get_loop_factory()
    settle_garbage_collector()
    try:
        if spare_fd is not None:
            name_process(SPARE_NAME)
            if not wait_until_told_to_serve(spare_fd):
                return  # the controller process is gone
        name_process(SERVING_NAME)
        server.run(sockets=[listener])
    finally:
        store.close()


WARM_UP_REQUESTS = (
    ("GET", "/healthz"),
    *(("GET", f"/api/v1/{path}") for path in ("jobs", "jobs/-", "teams", "nodes", "whoami")),
    ("POST", "/api/v1/jobs"),
)


def warm_up(app: Any, store: SqlStore) -> None:
    """Do before the first client what its first requests would otherwise wait for: open the
    store's pooled connections, and route a request (unauthenticated: nothing is read or
    written) to each common route, which builds FastAPI's per-route state. A fresh server's
    first burst of submissions waited about 100 ms for these. None of these requests is
    logged (neither by httpx nor as an API error or in the access log): they are not a
    client's."""
    store.database.open_connections()

    async def requests() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://warm-up") as client:
            for method, path in WARM_UP_REQUESTS:
                await client.request(method, path)

    with muted("httpx", ERRORS_LOGGER, ACCESS_LOGGER):
        asyncio.run(requests())


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when the controller process dies, even by SIGKILL,
    so that no API process outlives it holding the port (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the line above took effect
        os._exit(1)
