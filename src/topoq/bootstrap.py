"""Wiring: ``serve`` is what ``topoq server`` runs — two kinds of process sharing the store.

- **The controller process** (the one you start): it prepares the store, runs the controller
  loop (executor events, scheduling cycle, commit, dispatch) and owns the executor and its
  pods. It binds the API's listening socket and starts the API process(es) on it.
- **API processes** (``--api-workers``, default 1): uvicorn serving the REST API. They only
  read and write the store (see ``topoq.engine.intake``) and wake the controller through a
  pipe; a scheduling step over a long queue never stalls a request (docs/adr/0004).

On first start the store gets the cluster's nodes (from ``cluster_file``, else the example
cluster) and an admin token, written to ``data_dir/admin-token`` (mode 0600). A later start
on a ``cluster_file`` applies its difference to the stored nodes, as ``topoq cluster apply``
does (``api.service.apply_inventory``), logged; one that would remove or shrink a node under a
gang the store says runs refuses to start, nothing changed (without ``cluster_file`` the
stored nodes stay). A policy file, when given and different from the stored policy, becomes a
new policy version — unless the policy lint finds an error in it on the inventory: then the
start is refused. The lint's findings about the policy in force are logged. After a
restart, the gangs the store says hold capacity are adopted where their pods still run (the
local executor's outlive a crash, and a clean stop with ``keep_pods_on_exit``; a Kubernetes
cluster's always): they keep their pods and attempt and end as their pods do. Only a gang that
lost a pod while no server watched is requeued (``Controller.recover``). An API process
dies with the controller process (Linux parent-death signal); one that dies alone is replaced
by a warmed spare (``topoq.api_workers``). The data directory is private to the server's user
and the database URL stays off command lines (``topoq.server_environment``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import uvicorn

from topoq import server_environment
from topoq.api.access_log import ACCESS_LOGGER
from topoq.api.app import create_app
from topoq.api.cluster_intake import ClusterIntake
from topoq.api.errors import ERRORS_LOGGER
from topoq.api.service import Service, ServiceStore, apply_inventory, policy_finding
from topoq.api_workers import (
    LISTEN_BACKLOG,
    SERVING_NAME,
    SPARE_FD_OPTION,
    SPARE_NAME,
    ApiWorkers,
    listen,
    name_process,
    wait_until_told_to_serve,
)
from topoq.core.policy_gate import policy_warnings
from topoq.core.policy_lint import lint_policy
from topoq.discovery.policy import load_policy
from topoq.discovery.sources import LoadedCluster, load_cluster
from topoq.domain.errors import InvalidInputError, TopoqError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.identity import next_admin_token_name
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.quantity import parse_quantity
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, TopologySpec
from topoq.engine.controller import Controller
from topoq.engine.event_log import ServerEvent, policy_changed, write_event
from topoq.engine.intake import SYSTEM
from topoq.engine.metrics import ControlPlaneMetrics, MetricsFile
from topoq.engine.policy_watch import PolicyWatch, latest_version
from topoq.engine.ports import AuditEntry, ClusterJobSource, Executor, Store
from topoq.executors.kubernetes.plugin import check_rates
from topoq.executors.local import checked_log_limit
from topoq.executors.local.layout import write_private_text
from topoq.executors.registry import log_reader, make_executor, plugin
from topoq.executors.slurm.plugin import slurm_topology
from topoq.server_environment import (
    DATABASE_URL_ENV,
    RUNS_DIRECTORY,
    child_environment,
    keep_files_private,
    make_private,
)
from topoq.server_log import (
    DEFAULT_LOG_FORMAT,
    DEFAULT_LOG_LEVEL,
    LOG_FORMATS,
    LOG_LEVELS,
    LogSettings,
    configure_logging,
    muted,
)
from topoq.store.database import connect, resolve_url
from topoq.store.sql_store import SqlStore, open_store
from topoq.wire.v1 import Role

log = logging.getLogger("topoq.server")

ADMIN_TOKEN_FILE = "admin-token"
METRICS_FILE = "metrics.prom"
LOOP_INTERVAL_S = 0.5
MIN_STEP_GAP_S = 0.1
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8750
DEFAULT_EXECUTOR = "local"
KUBERNETES_LEVELS = (*AWS_NETWORK_LAYER_LABELS[:3], HOSTNAME_LABEL)
"""The topology levels of a Kubernetes cluster unless told otherwise: HyperPod's network
layers, then the hostname (as a Kueue Topology for HyperPod lists them)."""


DEFAULT_KUBERNETES_QPS = 50.0
DEFAULT_KUBERNETES_BURST = 100
DEFAULT_KUBERNETES_CONCURRENCY = 8
DEFAULT_SLURM_PARTITION = "topoq"


@dataclass(frozen=True)
class ClusterAccess:
    """How the executor reaches a real cluster (``--executor kubernetes``), and the topology
    levels of its nodes. Empty for the local executor."""

    kubeconfig: Path | None = None
    node_selector: str = ""
    namespace_pattern: str = "{team}"
    topology_levels: tuple[str, ...] = ()
    qps: float = DEFAULT_KUBERNETES_QPS
    """Requests a second to the API server, on average (client-go's default is 5)."""
    burst: int = DEFAULT_KUBERNETES_BURST
    concurrency: int = DEFAULT_KUBERNETES_CONCURRENCY
    """Connections that make and delete objects at once."""
    cluster_jobs: bool = True
    """Take in the cluster's own suspended Jobs that name a queue (docs/executors.md)."""
    slurm_conf: Path | None = None
    """``--executor slurm``: the cluster's slurm.conf (default: ``$SLURM_CONF``)."""
    slurm_partition: str = DEFAULT_SLURM_PARTITION
    """``--executor slurm``: the partition topoq owns and submits to."""

    def __post_init__(self) -> None:
        check_rates(self.qps, self.burst, self.concurrency)  # before anything is stored

    def executor_options(self) -> dict[str, Any]:
        return {
            "kubeconfig": self.kubeconfig,
            "node_selector": self.node_selector,
            "namespace_pattern": self.namespace_pattern,
            "qps": self.qps,
            "burst": self.burst,
            "concurrency": self.concurrency,
            "cluster_jobs": self.cluster_jobs,
        }

    def arguments(self) -> list[str]:
        """The options that say this on a command line (for the API processes, which need
        the topology)."""
        found = (
            ["--topology-levels", ",".join(self.topology_levels)] if self.topology_levels else []
        )
        if self.slurm_conf is not None:
            found += ["--slurm-conf", str(self.slurm_conf)]
        if self.slurm_partition != DEFAULT_SLURM_PARTITION:
            found += ["--slurm-partition", self.slurm_partition]
        return found


def topology_levels_option(text: str | None) -> tuple[str, ...]:
    """``--topology-levels`` (comma-separated node labels, broadest first)."""
    if text is None:
        return ()
    levels = tuple(part.strip() for part in text.split(",") if part.strip())
    if not levels:
        raise InvalidInputError(
            "no topology level given",
            where="--topology-levels",
            hint=f"give node labels, broadest first, e.g. {','.join(KUBERNETES_LEVELS)}",
        )
    return levels


def cluster_topology(
    executor_name: str, cluster: LoadedCluster, cluster_file: Path | None, access: ClusterAccess
) -> TopologySpec:
    """The levels the server places by: given ones, else the cluster file's, else (for an
    executor that reads the cluster's nodes) HyperPod's, else the example cluster's."""
    if access.topology_levels:
        return TopologySpec(
            cluster.topology.name if cluster_file else executor_name, access.topology_levels
        )
    if cluster_file is None and executor_name == "slurm":
        return slurm_topology(access.slurm_conf)
    if cluster_file is None and plugin(executor_name).capabilities.reports_inventory:
        return TopologySpec(executor_name, KUBERNETES_LEVELS)
    return cluster.topology


DEFAULT_API_WORKERS = 1
DEFAULT_API_SPARES = 1
SUPERVISE_INTERVAL_S = 0.05
"""How often the controller process looks for a dead API process (a ``poll`` each)."""
PR_SET_PDEATHSIG = 1
GC_YOUNG_THRESHOLD = 10_000
"""Allocations between young-generation collections (Python's default is 700)."""
FULL_COLLECTION_INTERVAL_S = 300.0
"""How often the controller process collects its whole heap, between two steps."""


def _nothing() -> None:
    return None


class ControllerLoop:
    """Runs ``controller.step()`` every ``interval_s`` and as soon as it is woken (``wake``,
    or a byte on ``wake_fd`` from an API process), but never sooner than ``min_gap_s`` — nor
    sooner than the previous step took — after the previous step ended: a burst of
    submissions wakes one step, not one per submission, and under a stream the steps take at
    most about half a core however long the queue grows. Before each step ``before_step`` runs
    (taking in the cluster's own Jobs), after it ``after_step`` (publishing the metrics). A
    failing step is logged and the loop goes on."""

    def __init__(
        self,
        controller: Controller,
        *,
        interval_s: float = LOOP_INTERVAL_S,
        min_gap_s: float = MIN_STEP_GAP_S,
        before_step: Callable[[], object] = _nothing,
        after_step: Callable[[], None] = lambda: None,
    ) -> None:
        self.controller = controller
        self.before_step = before_step
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.after_step = after_step
        self._read_fd, self.wake_fd = os.pipe()
        os.set_blocking(self.wake_fd, False)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topoq-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        wake_controller(self.wake_fd)

    def stop(self) -> None:
        self._stopped.set()
        self.wake()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        for descriptor in (self._read_fd, self.wake_fd):
            with contextlib.suppress(OSError):
                os.close(descriptor)

    def _run(self) -> None:
        while not self._stopped.is_set():
            readable, _, _ = select.select([self._read_fd], [], [], self.interval_s)
            if readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._read_fd, 65536)  # every wake so far: one step serves them
            if self._stopped.is_set():
                return
            began = time.monotonic()
            try:
                self.before_step()
                self.controller.step()
                self.after_step()
            except Exception:
                log.exception("a controller step failed; the next one retries")
            # under a stream of submissions, leave the CPU to the requests between steps:
            # the next step takes the whole burst anyway
            self._stopped.wait(max(self.min_gap_s, time.monotonic() - began))


def wake_controller(wake_fd: int) -> None:
    """Ask the controller loop for a step; never blocks (a full pipe already asks)."""
    with contextlib.suppress(BlockingIOError, BrokenPipeError, OSError):
        os.write(wake_fd, b"\0")


class GarbageBetweenSteps:
    """The controller process's full garbage collections, moved out of its steps. At 10,000
    pending jobs the heap holds ~450,000 tracked objects, and a step leaves enough new ones
    behind (diagnostics, views) that Python ran a full collection every two or three steps,
    ~175 ms inside whichever step it fell in (with ``settle_garbage_collector``'s young
    threshold as well, a step's collections went from ~100 to ~30 ms at 10,000 pending
    jobs, and none is a full one). After each step everything alive is frozen
    (``gc.freeze``: what is frozen is never scanned; what dies is still freed at once), so
    the collections inside a step scan only what that step made; every
    ``FULL_COLLECTION_INTERVAL_S`` the heap is unfrozen and collected whole, between steps,
    so reference cycles that became garbage after being frozen are reclaimed too."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = FULL_COLLECTION_INTERVAL_S,
    ) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self._collected_at = clock()

    def after_step(self) -> None:
        now = self.clock()
        if now - self._collected_at >= self.interval_s:
            gc.unfreeze()
            gc.collect()
            self._collected_at = now
        gc.freeze()


@dataclass
class Server:
    """The controller process's parts, built but not started."""

    store: SqlStore
    executor: Executor
    controller: Controller
    loop: ControllerLoop
    metrics: ControlPlaneMetrics
    admin_token_path: Path

    def close(self) -> None:
        self.loop.stop()
        try:
            self.controller.save_fair_share_usage()
        except Exception:  # the store may be away: the usage of the last minute is lost
            log.exception("could not save the teams' fair-share usage")
        self.executor.close()
        self.store.close()


def build_server(
    *,
    database_url: str | None,
    data_dir: Path,
    cluster_file: Path | None = None,
    policy_file: Path | None = None,
    executor_name: str = DEFAULT_EXECUTOR,
    pod_log_limit_bytes: int | None = None,
    access: ClusterAccess | None = None,
    keep_pods_on_exit: bool = False,
) -> Server:
    """The controller process's parts. ``keep_pods_on_exit``: the local executor's ``close``
    (a clean stop) leaves running pods running for the next server to adopt (the Kubernetes
    executor's pods always outlive it)."""
    access = access or ClusterAccess()
    found = plugin(executor_name, where="--executor")
    make_private(data_dir)
    store = open_store(database_url, data_dir)
    try:
        cluster = load_cluster(cluster_file)
        topology = cluster_topology(executor_name, cluster, cluster_file, access)
        if found.capabilities.reports_inventory:
            if policy_file is not None:
                _apply_policy_file(store, load_policy(policy_file), policy_file)
        else:
            _prepare_inventory_and_policy(store, cluster, cluster_file, policy_file, topology)
    except BaseException:
        store.close()
        raise
    options = _executor_options(executor_name, data_dir, access)
    if pod_log_limit_bytes is not None and executor_name == "local":
        options["pod_log_limit_bytes"] = pod_log_limit_bytes
    if keep_pods_on_exit and executor_name == "local":
        options["pods_outlive_executor"] = True
    try:
        executor = make_executor(executor_name, **options)
    except BaseException:
        store.close()
        raise
    metrics = ControlPlaneMetrics()
    controller = Controller(store, executor, topology, clock=time.time, metrics=metrics)
    controller.recover()  # each gang requeued is logged
    metrics_path = data_dir / METRICS_FILE
    metrics_path.unlink(missing_ok=True)  # a previous run's numbers
    settle_garbage_collector()  # what startup built stays out of full collections
    garbage = GarbageBetweenSteps()
    policies = PolicyWatch(store)

    def after_step() -> None:
        metrics.publish(metrics_path)
        policies.check()
        garbage.after_step()

    before_step: Callable[[], object] = _nothing
    if isinstance(executor, ClusterJobSource):
        before_step = ClusterIntake(
            executor,
            store,
            topology,
            namespace_pattern=access.namespace_pattern,
            clock=time.time,
        ).take
    loop = ControllerLoop(controller, before_step=before_step, after_step=after_step)
    return Server(store, executor, controller, loop, metrics, ensure_admin_token(store, data_dir))


START_DRAIN_HINT = (
    "start the server on its stored nodes (without --cluster, or with the previous file), then "
    "apply the new file with `topoq cluster apply FILE --drain` to requeue those gangs"
)


def _prepare_inventory_and_policy(
    store: ServiceStore,
    cluster: LoadedCluster,
    cluster_file: Path | None,
    policy_file: Path | None,
    topology: TopologySpec,
) -> None:
    """The cluster file's nodes (on first start, the example's) applied to the store's, and
    the policy file kept — checked first, so that a start refused writes nothing: the policy
    file against the nodes the store will have (a lint error refuses the start), then the
    inventory change (one that displaces a gang refuses it). The lint's findings about the
    policy in force are logged."""
    stored = store.nodes()
    apply_file = cluster_file is not None or not stored
    nodes = list(cluster.nodes) if apply_file else stored
    policy = load_policy(policy_file) if policy_file is not None else None
    if policy is not None:
        policy_warnings(policy, nodes, topology, where=str(policy_file))  # errors refuse
    if apply_file:
        source = f"--cluster {cluster_file}" if cluster_file is not None else "the example cluster"
        apply_inventory(
            store,
            nodes,
            actor=SYSTEM,
            source=source,
            drain=False,
            dry_run=False,
            now=time.time(),
            refusal_hint=START_DRAIN_HINT,
        )
    if policy is not None and policy_file is not None:
        _apply_policy_file(store, policy, policy_file)
    _log_policy_findings(store, store.nodes(), topology)


def _log_policy_findings(
    store: ServiceStore, nodes: list[NodeSpec], topology: TopologySpec
) -> None:
    policy = store.policy()
    if policy is None:
        return
    version = latest_version(store.policy_versions()) or None
    for finding in lint_policy(policy, nodes, topology):
        write_event(log, policy_finding(finding, version=version, source="start"))


def _apply_policy_file(store: Store, policy: ClusterPolicy, policy_file: Path) -> None:
    if store.policy() != policy:
        now = time.time()
        actor = f"{SYSTEM} ({policy_file.name})"
        version = store.save_policy(policy, actor=actor, now=now)
        store.audit(
            AuditEntry(now, SYSTEM, "policy", f"version {version}", {"file": str(policy_file)})
        )
        write_event(log, policy_changed(version, actor))


def _executor_options(name: str, data_dir: Path, access: ClusterAccess) -> dict[str, Any]:
    if name == "local":
        return {"work_dir": data_dir / RUNS_DIRECTORY}
    if name == "kubernetes":
        return access.executor_options()
    if name == "slurm":
        return {
            "work_dir": data_dir / RUNS_DIRECTORY,
            "slurm_conf": access.slurm_conf,
            "partition": access.slurm_partition,
        }
    return {}


POD_LOG_LIMIT_OPTION = "--pod-log-limit"


def _log_limit_bytes(pod_log_limit: str | None) -> int | None:
    """``--pod-log-limit`` (a quantity such as ``64Mi``) in bytes, checked before any work."""
    if pod_log_limit is None:
        return None
    try:
        limit = parse_quantity("memory", pod_log_limit)
    except InvalidInputError as error:
        raise InvalidInputError(
            error.message, where=POD_LOG_LIMIT_OPTION, hint="a size such as 64Mi or 1Gi"
        ) from None
    return checked_log_limit(limit, where=POD_LOG_LIMIT_OPTION)


def ensure_admin_token(store: ServiceStore, data_dir: Path) -> Path:
    """The admin token's file; a new token is made when there is none, or when the one in the
    file is not valid (e.g. a new database, or it was revoked): ``admin`` the first time, then
    ``admin-2``, ``admin-3``, … (token names are never given twice)."""
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        record = store.token_for(path.read_text(encoding="utf-8").strip())
        if record is not None and record.role == Role.ADMIN:
            return path
    taken = {token.name for token in store.tokens(include_revoked=True)}
    plaintext, _ = store.create_token(next_admin_token_name(taken), Role.ADMIN.value, ())
    write_private_text(path, plaintext + "\n")
    return path


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    database_url: str | None = None,
    data_dir: Path | str = Path(".topoq"),
    cluster_file: Path | str | None = None,
    policy_file: Path | str | None = None,
    executor_name: str = DEFAULT_EXECUTOR,
    api_workers: int = DEFAULT_API_WORKERS,
    api_spares: int = DEFAULT_API_SPARES,
    pod_log_limit: str | None = None,
    access: ClusterAccess | None = None,
    log_settings: LogSettings | None = None,
    keep_pods_on_exit: bool = False,
) -> None:
    """Run the server until SIGINT or SIGTERM, which stop every pod it runs — unless
    ``keep_pods_on_exit``: then running pods run on, for the next server on the same data
    directory to adopt (an upgrade without stopping the work)."""
    access = access or ClusterAccess()
    log_settings = log_settings or LogSettings()
    configure_logging(log_settings)
    keep_files_private()
    database_url = server_environment.database_url(database_url, os.environ)
    _check_process_counts(api_workers, api_spares)
    log_limit_bytes = _log_limit_bytes(pod_log_limit)
    data_dir = Path(data_dir).resolve()
    listener = listen(host, port)
    server = build_server(
        database_url=database_url,
        data_dir=data_dir,
        cluster_file=Path(cluster_file).resolve() if cluster_file is not None else None,
        policy_file=Path(policy_file) if policy_file is not None else None,
        executor_name=executor_name,
        pod_log_limit_bytes=log_limit_bytes,
        access=access,
        keep_pods_on_exit=keep_pods_on_exit,
    )
    command = [
        sys.executable, "-m", "topoq.bootstrap", "--api-process",
        "--listen-fd", str(listener.fileno()), "--wake-fd", str(server.loop.wake_fd),
        "--parent-pid", str(os.getpid()), "--data-dir", str(data_dir),
        "--executor", executor_name,
    ]  # fmt: skip
    if cluster_file is not None:
        command += ["--cluster", str(Path(cluster_file).resolve())]
    command += access.arguments() + log_settings.arguments()
    workers = ApiWorkers(
        command,
        (listener.fileno(), server.loop.wake_fd),
        api_workers,
        environment=child_environment(database_url, os.environ),
        spares=api_spares,
    )
    write_event(
        log,
        started_event(
            f"http://{host}:{port}/api/v1",
            executor=executor_name,
            store=resolve_url(database_url, data_dir).get_backend_name(),
            data_dir=data_dir,
            admin_token=server.admin_token_path,
            api_workers=api_workers,
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


MAX_API_PROCESSES = 64
"""The most API processes (and, apart, warmed spares) a server starts: more only exhausts the
machine (each is a Python process of ~60 MiB)."""


def _check_process_counts(api_workers: int, api_spares: int) -> None:
    for option, count in (("--api-workers", api_workers), ("--api-spares", api_spares)):
        if count > MAX_API_PROCESSES:
            raise InvalidInputError(
                f"{option} {count} is more processes than a server starts",
                where=option,
                hint=f"give at most {MAX_API_PROCESSES}",
            )
    if api_workers < 1:
        raise InvalidInputError(
            f"--api-workers {api_workers} serves nothing",
            where="--api-workers",
            hint="give 1 or more",
        )
    if api_spares < 0:
        raise InvalidInputError(
            f"--api-spares {api_spares} is not a number of processes",
            where="--api-spares",
            hint="give 0 (a dead API process is replaced by a cold start) or more",
        )


STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What stops ``topoq server``: a service manager's SIGTERM, a terminal's Ctrl-C (SIGINT) alike
(each logs ``server_stopped`` and exits 128 + the signal's number)."""


class _Termination:
    """SIGTERM or SIGINT asks the server to stop: noted here, and acted on between two
    supervisions of the API processes, never inside one (an exit raised there, as the handler
    once did, could leave a spare just started off the list of processes to stop).
    ``serve``'s ``finally`` then stops the API processes and every pod and closes the store."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum


def serve_api(
    *,
    listen_fd: int,
    wake_fd: int,
    parent_pid: int,
    database_url: str | None,
    data_dir: Path,
    cluster_file: Path | None,
    executor_name: str,
    spare_fd: int | None = None,
    access: ClusterAccess | None = None,
    log_settings: LogSettings | None = None,
) -> None:
    """One API process: uvicorn on the controller process's listening socket. A spare
    (``spare_fd``) gets everything ready, then waits on that pipe until told to serve."""
    _die_with_parent(parent_pid)
    keep_files_private()
    log_settings = log_settings or LogSettings()
    configure_logging(log_settings)
    os.set_blocking(wake_fd, False)
    store = SqlStore(connect(resolve_url(database_url, data_dir)))  # migrated by the controller
    access = access or ClusterAccess()
    cluster = load_cluster(cluster_file)
    service = Service(
        store,
        cluster_topology(executor_name, cluster, cluster_file, access),
        logs=log_reader(executor_name, **_executor_options(executor_name, data_dir, access)),
        wake=lambda: wake_controller(wake_fd),
        metrics=MetricsFile(data_dir / METRICS_FILE),
        inventory_from_executor=plugin(executor_name).capabilities.reports_inventory,
        executor=plugin(executor_name).capabilities,
    )
    listener = socket.socket(fileno=listen_fd)
    app = create_app(service, access_log=log_settings.access_log)
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


def settle_garbage_collector() -> None:
    """Keep what startup built (modules, the app, its schemas: most of the heap) out of the
    collector's full passes, and run those passes less often. A full pass over a server's
    heap stops every request for about 100 ms, which is what the slowest requests waited."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when the controller process dies, even by SIGKILL,
    so that no API process outlives it holding the port (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the line above took effect
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m topoq.bootstrap``: the server without the CLI (``topoq server`` is the same)."""
    parser = argparse.ArgumentParser(prog="python -m topoq.bootstrap", description=serve.__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--database",
        default=None,
        help=f"default: {DATABASE_URL_ENV}, else SQLite in the data directory",
    )
    parser.add_argument("--data-dir", default=".topoq")
    parser.add_argument("--cluster", default=None, help="default: the example cluster")
    parser.add_argument("--policy", default=None)
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR)
    parser.add_argument("--api-workers", type=int, default=DEFAULT_API_WORKERS)
    parser.add_argument("--api-spares", type=int, default=DEFAULT_API_SPARES)
    parser.add_argument("--api-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--wake-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pod-log-limit", default=None, help="default: 64Mi")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--node-selector", default="")
    parser.add_argument("--namespace-pattern", default="{team}")
    parser.add_argument("--topology-levels", default=None)
    parser.add_argument("--kube-qps", type=float, default=DEFAULT_KUBERNETES_QPS)
    parser.add_argument("--kube-burst", type=int, default=DEFAULT_KUBERNETES_BURST)
    parser.add_argument("--kube-concurrency", type=int, default=DEFAULT_KUBERNETES_CONCURRENCY)
    parser.add_argument("--no-cluster-jobs", action="store_true")
    parser.add_argument("--slurm-conf", default=None)
    parser.add_argument("--slurm-partition", default=DEFAULT_SLURM_PARTITION)
    parser.add_argument(SPARE_FD_OPTION, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=DEFAULT_LOG_FORMAT)
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=DEFAULT_LOG_LEVEL)
    parser.add_argument("--access-log", action="store_true")
    parser.add_argument(
        "--keep-pods-on-exit",
        action="store_true",
        help="a clean stop (SIGTERM, Ctrl-C) leaves running pods running, for the next server "
        "on the same data directory to adopt",
    )
    args = parser.parse_args(argv)
    try:
        _run(args)
    except (TopoqError, OSError) as error:  # bad input at start: one line, never a traceback
        sys.stderr.write(f"error: {error_line(error)}\n")
        raise SystemExit(EXIT_BAD_INPUT) from None


EXIT_BAD_INPUT = 2
"""What ``python -m topoq.bootstrap`` (and ``topoq server``) exit with when the start is refused:
a bad option, cluster, policy or data directory, a port in use (docs/cli.md's exit codes)."""


def error_line(error: BaseException) -> str:
    """An error refusing the start as one line: a ``TopoqError``'s message (which says where and
    how to fix it), or an ``OSError``'s file and reason; control characters (from a quoted bad
    file) escaped."""
    if isinstance(error, OSError) and error.strerror:
        text = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    else:
        text = str(error)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _run(args: argparse.Namespace) -> None:
    log_settings = LogSettings(args.log_format, args.log_level, args.access_log)
    access = ClusterAccess(
        Path(args.kubeconfig).resolve() if args.kubeconfig else None,
        args.node_selector,
        args.namespace_pattern,
        topology_levels_option(args.topology_levels),
        qps=args.kube_qps,
        burst=args.kube_burst,
        concurrency=args.kube_concurrency,
        cluster_jobs=not args.no_cluster_jobs,
        slurm_conf=Path(args.slurm_conf).resolve() if args.slurm_conf else None,
        slurm_partition=args.slurm_partition,
    )
    if args.api_process:
        serve_api(
            listen_fd=args.listen_fd,
            wake_fd=args.wake_fd,
            parent_pid=args.parent_pid,
            database_url=os.environ.get(DATABASE_URL_ENV) or None,
            data_dir=Path(args.data_dir),
            cluster_file=Path(args.cluster) if args.cluster else None,
            executor_name=args.executor,
            spare_fd=args.spare_fd,
            access=access,
            log_settings=log_settings,
        )
        return
    serve(
        args.host,
        args.port,
        args.database,
        args.data_dir,
        args.cluster,
        args.policy,
        args.executor,
        args.api_workers,
        args.api_spares,
        args.pod_log_limit,
        access,
        log_settings,
        keep_pods_on_exit=args.keep_pods_on_exit,
    )


if __name__ == "__main__":
    main()
