"""``topoq server`` and ``python -m topoq.bootstrap``: check the settings, build the controller
process's parts, start the API processes on its listening socket, and run until SIGTERM or
SIGINT. A start refused (bad input) is one line ``error: …`` and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from topoq import server_environment
from topoq.api_workers import SPARE_FD_OPTION, ApiWorkers, listen
from topoq.domain.errors import TopoqError
from topoq.engine.event_log import ServerEvent, write_event
from topoq.engine.policy_watch import latest_version
from topoq.server.api_process import serve_api
from topoq.server.build import build_server
from topoq.server.settings import ServerSettings, add_arguments, settings_from
from topoq.server_environment import DATABASE_URL_ENV, child_environment, keep_files_private
from topoq.server_log import LogSettings, configure_logging
from topoq.store.database import resolve_url

log = logging.getLogger("topoq.server")

API_PROCESS_MODULE = "topoq.bootstrap"
SUPERVISE_INTERVAL_S = 0.05
"""How often the controller process looks for a dead API process (a ``poll`` each)."""
EXIT_BAD_INPUT = 2
"""What ``python -m topoq.bootstrap`` (and ``topoq server``) exit with when the start is refused:
a bad option, cluster, policy or data directory, a port in use (docs/cli.md's exit codes)."""
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What stops ``topoq server``: a service manager's SIGTERM, a terminal's Ctrl-C (SIGINT) alike
(each logs ``server_stopped`` and exits 128 + the signal's number)."""


def start(settings: ServerSettings) -> None:
    """``serve``, with a start refused as one line on stderr and exit 2."""
    try:
        serve(settings)
    except (TopoqError, OSError) as error:  # bad input at start: one line, never a traceback
        sys.stderr.write(f"error: {error_line(error)}\n")
        raise SystemExit(EXIT_BAD_INPUT) from None


def serve(settings: ServerSettings) -> None:
    """Run the server until SIGINT or SIGTERM, which stop every pod it runs — unless
    ``keep_pods_on_exit``: then running pods run on, for the next server on the same data
    directory to adopt (an upgrade without stopping the work)."""
    log_settings = LogSettings(settings.log_format, settings.log_level, settings.access_log)
    configure_logging(log_settings)
    keep_files_private()
    settings = dataclasses.replace(
        settings,
        database_url=server_environment.database_url(settings.database_url, os.environ),
        data_dir=settings.data_dir.resolve(),
        cluster_file=settings.cluster_file.resolve() if settings.cluster_file else None,
        kubeconfig=settings.kubeconfig.resolve() if settings.kubeconfig else None,
        slurm_conf=settings.slurm_conf.resolve() if settings.slurm_conf else None,
    )
    listener = listen(settings.host, settings.port)
    server = build_server(settings)
    command = [
        sys.executable, "-m", API_PROCESS_MODULE, "--api-process",
        "--listen-fd", str(listener.fileno()), "--wake-fd", str(server.loop.wake_fd),
        "--parent-pid", str(os.getpid()), *settings.command_line(),
    ]  # fmt: skip
    workers = ApiWorkers(
        command,
        (listener.fileno(), server.loop.wake_fd),
        settings.api_workers,
        environment=child_environment(settings.database_url, os.environ),
        spares=settings.api_spares,
    )
    write_event(
        log,
        started_event(
            f"http://{settings.host}:{settings.port}/api/v1",
            executor=settings.executor,
            store=resolve_url(settings.database_url, settings.data_dir).get_backend_name(),
            data_dir=settings.data_dir,
            admin_token=server.admin_token_path,
            api_workers=settings.api_workers,
            policy_version=latest_version(server.store.policy_versions()),
        ),
    )
    termination = _Termination()
    if threading.current_thread() is threading.main_thread():
        for signum in STOPPING_SIGNALS:
            signal.signal(signum, termination.note)
    try:
        server.loop.start()
        workers.start()
        while termination.signum is None:
            time.sleep(SUPERVISE_INTERVAL_S)
            if termination.signum is None:
                workers.supervise()
    finally:
        workers.stop()
        listener.close()
        server.close()
    name = signal.Signals(termination.signum).name
    write_event(
        log, stopped_event(name, pods_kept=server.executor.capabilities.pods_outlive_executor)
    )
    raise SystemExit(128 + termination.signum)


def started_event(
    url: str,
    *,
    executor: str,
    store: str,
    data_dir: Path,
    admin_token: Path,
    api_workers: int,
    policy_version: int,
) -> ServerEvent:
    """The one start-up line: where the API listens and what serves it (``store``: the
    database's kind, ``sqlite`` or ``postgresql``, never its URL, which may carry a
    password)."""
    return ServerEvent(
        "server_started",
        f"topoq server on {url} (OpenAPI at /docs), executor {executor}, store {store}, "
        f"data directory {data_dir}",
        {
            "url": url,
            "executor": executor,
            "store": store,
            "data_dir": str(data_dir),
            "admin_token_file": str(admin_token),
            "api_workers": api_workers,
            "policy_version": policy_version or None,
        },
    )


def stopped_event(signal_name: str, *, pods_kept: bool) -> ServerEvent:
    """The last line: the signal that stopped the server, and whether running pods were left
    running for the next server to adopt."""
    kept = "; running pods left running for the next server to adopt" if pods_kept else ""
    return ServerEvent(
        "server_stopped",
        f"stopped on {signal_name}{kept}",
        {"signal": signal_name, "pods_kept": pods_kept},
    )


class _Termination:
    """SIGTERM or SIGINT asks the server to stop: noted here, and acted on between two
    supervisions of the API processes, never inside one (an exit raised there, as the handler
    once did, could leave a spare just started off the list of processes to stop).
    ``serve``'s ``finally`` then stops the API processes and every pod and closes the store."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum


def error_line(error: BaseException) -> str:
    """An error refusing the start as one line: a ``TopoqError``'s message (which says where and
    how to fix it), or an ``OSError``'s file and reason; control characters (from a quoted bad
    file) escaped."""
    if isinstance(error, OSError) and error.strerror:
        text = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    else:
        text = str(error)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m topoq.bootstrap``: the server without the CLI (``topoq server`` is the same);
    with ``--api-process``, one of its API processes."""
    parser = argparse.ArgumentParser(prog="python -m topoq.bootstrap", description=serve.__doc__)
    add_arguments(parser)
    parser.add_argument("--api-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--wake-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument(SPARE_FD_OPTION, type=int, help=argparse.SUPPRESS)
    args = vars(parser.parse_args(argv))
    if not args["api_process"]:
        start(_settings(args))
        return
    settings = dataclasses.replace(
        _settings(args), database_url=os.environ.get(DATABASE_URL_ENV) or None
    )  # the URL never rides on a command line
    serve_api(
        settings,
        listen_fd=args["listen_fd"],
        wake_fd=args["wake_fd"],
        parent_pid=args["parent_pid"],
        spare_fd=args["spare_fd"],
    )


def _settings(args: dict[str, object]) -> ServerSettings:
    try:
        return settings_from(args)
    except TopoqError as error:
        sys.stderr.write(f"error: {error_line(error)}\n")
        raise SystemExit(EXIT_BAD_INPUT) from None
