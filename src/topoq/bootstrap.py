"""Wiring: the store, the executor, the controller and its loop, and the API, served by
uvicorn. ``serve`` is what ``topoq server`` runs.

On first start the store gets the cluster's nodes (from ``cluster_file``, else the example
cluster) and an admin token, written to ``data_dir/admin-token`` (mode 0600). A policy file,
when given and different from the stored policy, becomes a new policy version. After a
restart, gangs the store says were running are requeued (their processes did not survive).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import uvicorn

from topoq.api.app import create_app
from topoq.api.service import Service, ServiceStore
from topoq.discovery.policy import load_policy
from topoq.discovery.sources import load_cluster
from topoq.engine.controller import SYSTEM, Controller
from topoq.engine.metrics import ControlPlaneMetrics
from topoq.engine.ports import AuditEntry
from topoq.executors.registry import make_executor
from topoq.store.sql_store import open_store
from topoq.wire.v1 import Role

log = logging.getLogger("topoq.server")

ADMIN_TOKEN_FILE = "admin-token"
ADMIN_TOKEN_NAME = "admin"
LOOP_INTERVAL_S = 0.5
MIN_STEP_GAP_S = 0.1
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8750
DEFAULT_EXECUTOR = "local"


class ControllerLoop:
    """Runs ``controller.step()`` every ``interval_s`` and as soon as it is woken (after a
    submission or a node change), but never sooner than ``min_gap_s`` — nor sooner than the
    previous step took — after the previous step ended: a burst of submissions wakes one step,
    not one per submission, and under a stream the steps take at most about half the CPU
    however long the queue grows. Each step holds the service's lock. A failing step is logged
    and the loop goes on."""

    def __init__(
        self,
        service: Service,
        *,
        interval_s: float = LOOP_INTERVAL_S,
        min_gap_s: float = MIN_STEP_GAP_S,
    ) -> None:
        self.service = service
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self._woken = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topoq-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._woken.set()

    def stop(self) -> None:
        self._stopped.set()
        self._woken.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._woken.wait(self.interval_s)
            self._woken.clear()
            if self._stopped.is_set():
                return
            began = time.monotonic()
            try:
                with self.service.lock:
                    self.service.controller.step()
            except Exception:
                log.exception("a controller step failed; the next one retries")
            # under a stream of submissions, leave the CPU to the requests between steps:
            # the next step takes the whole burst anyway
            self._stopped.wait(max(self.min_gap_s, time.monotonic() - began))


@dataclass
class Server:
    """Everything ``serve`` runs, built but not started."""

    service: Service
    loop: ControllerLoop
    admin_token_path: Path

    def close(self) -> None:
        self.loop.stop()
        self.service.executor.close()
        close = getattr(self.service.store, "close", None)
        if callable(close):
            close()


def build_server(
    *,
    database_url: str | None,
    data_dir: Path,
    cluster_file: Path | None = None,
    policy_file: Path | None = None,
    executor_name: str = DEFAULT_EXECUTOR,
) -> Server:
    data_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(database_url, data_dir)
    cluster = load_cluster(cluster_file)
    if not store.nodes():
        store.save_nodes(cluster.nodes, actor=SYSTEM, now=time.time())
        store.audit(AuditEntry(time.time(), SYSTEM, "nodes", cluster.name, {"source": "cluster"}))
    if policy_file is not None:
        _apply_policy_file(store, policy_file)
    executor = make_executor(executor_name, **_executor_options(executor_name, data_dir))
    metrics = ControlPlaneMetrics()
    controller = Controller(store, executor, cluster.topology, clock=time.time, metrics=metrics)
    requeued = controller.recover()
    if requeued:
        log.warning("requeued after a restart: %s", ", ".join(requeued))
    service = Service(store, executor, controller, metrics=metrics)
    loop = ControllerLoop(service)
    service.wake = loop.wake
    return Server(service, loop, ensure_admin_token(store, data_dir))


def _apply_policy_file(store: ServiceStore, policy_file: Path) -> None:
    policy = load_policy(policy_file)
    if store.policy() != policy:
        now = time.time()
        version = store.save_policy(policy, actor=f"{SYSTEM} ({policy_file.name})", now=now)
        store.audit(
            AuditEntry(now, SYSTEM, "policy", f"version {version}", {"file": str(policy_file)})
        )


def _executor_options(name: str, data_dir: Path) -> dict[str, Any]:
    return {"work_dir": data_dir / "runs"} if name == "local" else {}


def ensure_admin_token(store: ServiceStore, data_dir: Path) -> Path:
    """The admin token's file; a new token is made when there is none, or when the one in the
    file is not valid (e.g. a new database)."""
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        record = store.token_for(path.read_text(encoding="utf-8").strip())
        if record is not None and record.role == Role.ADMIN:
            return path
    plaintext, _ = store.create_token(ADMIN_TOKEN_NAME, Role.ADMIN.value, ())
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(plaintext + "\n")
    path.chmod(0o600)
    return path


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    database_url: str | None = None,
    data_dir: Path | str = Path(".topoq"),
    cluster_file: Path | str | None = None,
    policy_file: Path | str | None = None,
    executor_name: str = DEFAULT_EXECUTOR,
) -> None:
    """Run the server until SIGINT or SIGTERM."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    server = build_server(
        database_url=database_url,
        data_dir=Path(data_dir),
        cluster_file=Path(cluster_file) if cluster_file is not None else None,
        policy_file=Path(policy_file) if policy_file is not None else None,
        executor_name=executor_name,
    )
    print(f"topoq server on http://{host}:{port}/api/v1 (OpenAPI at /docs)", flush=True)
    print(f"admin token in {server.admin_token_path} (mode 0600)", flush=True)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        server.loop.start()
        app = create_app(server.service)
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
    finally:
        server.close()


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    """uvicorn shuts down on SIGTERM, then raises the signal again under the handler it found;
    exiting through Python here (not the default handler's instant death) runs ``serve``'s
    ``finally``, which stops every pod and closes the store."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m topoq.bootstrap``: the server without the CLI (``topoq server`` is the same)."""
    parser = argparse.ArgumentParser(prog="python -m topoq.bootstrap", description=serve.__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--database", default=None, help="default: SQLite in the data directory")
    parser.add_argument("--data-dir", default=".topoq")
    parser.add_argument("--cluster", default=None, help="default: the example cluster")
    parser.add_argument("--policy", default=None)
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR)
    args = parser.parse_args(argv)
    serve(
        args.host,
        args.port,
        args.database,
        args.data_dir,
        args.cluster,
        args.policy,
        args.executor,
    )


if __name__ == "__main__":
    main()
